// The file in the data directory through which `npm start` tells `npm run replica` how to join
// its stack (dev-start.ts writes it, replica.ts reads it).
export const STACK_FILE = 'stack.json';

export interface StackFile {
  /** npm start's own pid: the stack runs while it does. */
  pid: number;
  server_port: number;
  /** The sandboxd npm start runs (its token is the data directory's sandboxd.token); null when SANDBOX_BASE_URL named another backend. */
  sandbox_base_url: string | null;
  sandbox_callback_url: string | null;
  sandboxd_service_routes: string | null;
}
