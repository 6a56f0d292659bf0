/** Programmatic API: embed the gateway in another process (tests and the benchmark do). */
export { loadConfigFile, parseConfig, ConfigError, type Config } from './config/load.js';
export { createRuntime, type Runtime, type RuntimeOptions } from './runtime.js';
export { createApp } from './app.js';
export { startGateway, type RunningGateway } from './main.js';
export { GatewayError, ERROR_CODES, type ErrorCode } from './errors.js';
