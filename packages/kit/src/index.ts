export * from './logger.js';
export * from './errors.js';
export * from './env.js';
export * from './lifecycle.js';
export * from './ids.js';
export * from './conversation.js';
export * from './address-policy.js';
export * from './limiter.js';
