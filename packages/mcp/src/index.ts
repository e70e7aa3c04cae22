export * from './port.js';
export * from './server.js';
export * from './stdio.js';
