import type { FailureClass } from '@memstream/contracts';

/**
 * One error family. HTTP maps it in one middleware (gateway); the consumer runner maps it to
 * ack / nak / term in one place. Anything that is not an AppError is treated as transient by the
 * runner and as a 500 by HTTP.
 */
export class AppError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly httpStatus: number,
    readonly details?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad input: 400, and for a pipeline stage a permanent failure. */
export class ValidationError extends AppError {
  constructor(message: string, details?: string) {
    super('validation', message, 400, details);
  }
}

export class AuthError extends AppError {
  constructor(message = 'Unauthorized', details?: string) {
    super('unauthorized', message, 401, details);
  }
}

export class PermissionError extends AppError {
  constructor(message = 'Forbidden', details?: string) {
    super('forbidden', message, 403, details);
  }
}

export class NotFoundError extends AppError {
  constructor(message = 'Not found', details?: string) {
    super('not_found', message, 404, details);
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(message: string, details?: string) {
    super('too_large', message, 413, details);
  }
}

/** A stage cannot succeed on this input however often it retries: fail the document now. */
export class PermanentError extends AppError {
  readonly failureClass: FailureClass;
  constructor(message: string, failureClass: FailureClass = 'permanent') {
    super('permanent', message, 422);
    this.failureClass = failureClass;
  }
}

/** Worth retrying later (a dependency is down, a timeout). */
export class RetryableError extends AppError {
  constructor(message: string, readonly retryAfterMs?: number) {
    super('retryable', message, 503);
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
