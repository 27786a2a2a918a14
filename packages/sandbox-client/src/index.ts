export {
  type AttachOptions,
  type CallOptions,
  type CheckpointOptions,
  type CheckpointResult,
  checkpointIdOf,
  createSandboxClient,
  type ExecOptions,
  type ExecResult,
  type ExecStreamOptions,
  type ListOptions,
  type RuntimeLayerStatus,
  type SandboxClient,
  type SandboxClientOptions,
  type WriteFileOptions,
} from './client.ts';
export {
  SandboxApiError,
  SandboxOperationError,
  SandboxProtocolError,
  SandboxTimeoutError,
  SandboxTransportError,
} from './errors.ts';
export { decodeExitCode, type ExecHandle, type ExecHandlers, StreamId } from './exec.ts';
export { defaultRetryPolicy, isRetryable, type RetryPolicy } from './retry.ts';
export type {
  CreateResult,
  ExecSessionInfo,
  NetworkPolicy,
  NetworkRule,
  SandboxInfo,
  SandboxLogger,
  StreamEvent,
} from './types.ts';
