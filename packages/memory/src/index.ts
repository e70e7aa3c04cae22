export * from './evolve.js';
export * from './resolve.js';
export * from './extract/port.js';
export * from './extract/offline.js';
export { ATTRIBUTE_RULES, FORGET_RULES, SINGLE_VALUED } from './extract/rules.js';
export * from './store/port.js';
export * from './store/sqlite.js';
export * from './log.js';
export * from './memorize.js';
