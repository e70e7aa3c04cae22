export * from './connect.js';
export * from './topology.js';
export * from './events.js';
export * from './runner.js';
export * from './decide.js';
export * from './stage.js';
export * from './pull-loop.js';
export * from './admission.js';
export * from './backlog.js';
export * from './acks.js';
export * from './yield-to-adds.js';
export * from './blobs.js';
export * from './worker.js';
export * from './testing.js';
export * from './rate-limit.js';
export * from './embedding-config.js';
// Services that read the log with their own ordered consumers name a start policy without depending on the client themselves
// (and tests that reset a durable consumer, its ack policy).
export { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
