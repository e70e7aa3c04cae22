export * from './connect.js';
export * from './topology.js';
export * from './events.js';
export * from './runner.js';
export * from './blobs.js';
export * from './worker.js';
export * from './testing.js';
