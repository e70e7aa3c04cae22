export * from './nats-server.js';
export * from './stack.js';
export * from './bundle.js';
export * from './replay.js';
export * from './args.js';
