import { startTelemetry } from './tracing.js';

// Imported first by every service's main.ts (through the package index): the SDK is up before
// any application module runs.
startTelemetry();
