// What a failed install says when the sandbox's egress proxy refused it. sandboxd answers a
// refused request with a 403 whose status line gives the reason (apps/sandboxd/src/proxy/
// proxy.ts), which apt, npm and pip print; the stage's failure then names the setting that
// opens the way, instead of leaving the reader to find it in the output. Invariant
// (egress-refusal.test.ts): the hint names no host: the host is in the log, where the
// redactor has seen it, while a failure reason is not redacted. The reasons' wording is sandboxd's
// (@paddock/sandbox-client/egress-refusals).
import {
  EGRESS_DENIED as DENIED,
  EGRESS_NOT_PUBLIC as NOT_PUBLIC,
} from '@paddock/sandbox-client/egress-refusals';

/** Enough of the end of the previous chunk for a reason split across two chunks. */
const CARRY = 200;

export interface EgressWatch {
  /** Feeds a chunk of the command's output. */
  feed(chunk: Buffer): void;
  /** The sentence naming the setting to change, or null when no refusal was seen. */
  hint(): string | null;
}

export function watchEgressRefusals(): EgressWatch {
  let carry = '';
  let denied = false;
  let notPublic = false;
  return {
    feed(chunk) {
      const text = carry + chunk.toString('utf8');
      denied ||= DENIED.test(text);
      notPublic ||= NOT_PUBLIC.test(text);
      carry = text.slice(-CARRY);
    },
    hint() {
      const hints: string[] = [];
      if (denied) {
        hints.push(
          "the sandbox network policy denied a host it installs from: add that host to the environment's networking_config.allowed_hosts (or set networking_type to unrestricted)",
        );
      }
      if (notPublic) {
        hints.push(
          "sandboxd refused a host that resolves to a private or loopback address: the operator opens a private range (a package mirror) with SANDBOXD_EGRESS_ALLOW_CIDRS (docs/sandboxd.md); loopback and the host's own addresses are never reachable",
        );
      }
      return hints.length > 0 ? hints.join('; ') : null;
    },
  };
}
