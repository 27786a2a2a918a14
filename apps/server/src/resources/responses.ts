// Error response schemas for the OpenAPI document of the resource routes. Loose on purpose:
// the error handler owns the exact body, and a response schema must never turn an error
// into a serialization failure.
import { z } from 'zod';

export const ErrorResponse = z.object({ error: z.string(), message: z.string() }).loose();

export const ValidationErrorResponse = z
  .object({
    error: z.string(),
    message: z.string(),
    errors: z.record(z.string(), z.array(z.string())).optional(),
  })
  .loose();
