export * from './names.js';
export * from './common.js';
export * from './events.js';
export * from './http.js';
export * from './vectors.js';
export * from './filters.js';
export * from './search.js';
