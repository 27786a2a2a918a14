// GitHub OAuth (web application flow) client: authorize URL, code exchange, profile and
// verified emails. Endpoints come from config (GITHUB_OAUTH_BASE_URL / GITHUB_API_URL) so
// tests point them at a loopback fake that speaks the same protocol.
import { z } from 'zod';
import type { Config } from '../config/config.ts';

export interface GithubIdentity {
  providerUserId: string;
  login: string;
  primaryEmail?: string;
  verifiedEmails: string[];
}

const TIMEOUT_MS = 10_000;

const TokenResponse = z.object({ access_token: z.string().min(1) });
const UserResponse = z.object({ id: z.number().int(), login: z.string() });
const EmailsResponse = z.array(z.object({ email: z.string(), primary: z.boolean(), verified: z.boolean() }));

export class OAuthError extends Error {}

export function githubRedirectUri(config: Config): string {
  return new URL('/auth/oauth/github/callback', config.publicUrl.origin).toString();
}

export function githubAuthorizeUrl(config: Config, state: string): string {
  const gh = config.oauth.github!;
  const u = new URL(gh.authorizeUrl);
  u.searchParams.set('client_id', gh.clientId);
  u.searchParams.set('redirect_uri', githubRedirectUri(config));
  u.searchParams.set('scope', 'read:user user:email');
  u.searchParams.set('state', state);
  u.searchParams.set('allow_signup', 'true');
  return u.toString();
}

async function json(res: Response, what: string): Promise<unknown> {
  if (!res.ok) throw new OAuthError(`GitHub ${what} answered ${res.status}`);
  return await res.json();
}

/** Exchanges the authorization code and reads the identity; only verified emails are returned. */
export async function fetchGithubIdentity(config: Config, code: string): Promise<GithubIdentity> {
  const gh = config.oauth.github!;
  const tokenRes = await fetch(gh.tokenUrl, {
    method: 'POST',
    headers: { accept: 'application/json', 'content-type': 'application/json' },
    body: JSON.stringify({
      client_id: gh.clientId,
      client_secret: gh.clientSecret ?? '',
      code,
      redirect_uri: githubRedirectUri(config),
    }),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const token = TokenResponse.safeParse(await json(tokenRes, 'token exchange'));
  // GitHub answers 200 with {"error": "bad_verification_code"} for a bad code.
  if (!token.success) throw new OAuthError('GitHub refused the authorization code');
  const headers = {
    accept: 'application/vnd.github+json',
    authorization: `Bearer ${token.data.access_token}`,
    'user-agent': 'paddock',
    'x-github-api-version': '2022-11-28',
  };
  const [userRes, emailsRes] = await Promise.all([
    fetch(`${gh.apiUrl}/user`, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) }),
    fetch(`${gh.apiUrl}/user/emails`, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) }),
  ]);
  const user = UserResponse.safeParse(await json(userRes, '/user'));
  const emails = EmailsResponse.safeParse(await json(emailsRes, '/user/emails'));
  if (!user.success || !emails.success) throw new OAuthError('GitHub answered with an unexpected shape');
  const verified = emails.data.filter((e) => e.verified);
  const primary = verified.find((e) => e.primary)?.email;
  return {
    providerUserId: String(user.data.id),
    login: user.data.login,
    ...(primary ? { primaryEmail: primary } : {}),
    verifiedEmails: verified.map((e) => e.email),
  };
}
