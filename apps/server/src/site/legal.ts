// /terms and /privacy: plain server-rendered pages from the four LEGAL_* variables, only when
// all four are set (config refuses a partial set). Every value is HTML-escaped.
import type { Config } from '../config/config.ts';

type Legal = NonNullable<Config['legal']>;

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>${escapeHtml(title)} · Paddock</title>
<style>body{font:16px/1.6 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem}h1{font-size:1.6rem}</style>
</head><body><p><a href="/">Paddock</a></p>${body}</body></html>`;
}

export function termsPage(legal: Legal): string {
  const e = {
    entity: escapeHtml(legal.entity),
    contact: escapeHtml(legal.contactEmail),
    jurisdiction: escapeHtml(legal.jurisdiction),
    date: escapeHtml(legal.effectiveDate),
  };
  return page(
    'Terms of service',
    `<h1>Terms of service</h1>
<p>Effective ${e.date}. This Paddock instance is operated by ${e.entity}.</p>
<p>You may use it to run coding agents on code and data you are entitled to use. You are responsible for the prompts you send, the agents you configure and the credentials you store; do not use the service to break the law or to attack other systems.</p>
<p>The service is provided as is, without warranty; the operator may suspend accounts that abuse it.</p>
<p>These terms are governed by the laws of ${e.jurisdiction}. Questions: <a href="mailto:${e.contact}">${e.contact}</a>.</p>
<p><a href="/privacy">Privacy policy</a></p>`,
  );
}

export function privacyPage(legal: Legal): string {
  const e = {
    entity: escapeHtml(legal.entity),
    contact: escapeHtml(legal.contactEmail),
    jurisdiction: escapeHtml(legal.jurisdiction),
    date: escapeHtml(legal.effectiveDate),
  };
  return page(
    'Privacy policy',
    `<h1>Privacy policy</h1>
<p>Effective ${e.date}. ${e.entity} operates this Paddock instance and is responsible for the data it holds.</p>
<p>We store your account (email address, password hash), the environments, vaults and agents you define (secrets encrypted), your conversations with their logs (secret values redacted), an audit trail of account and security events, and usage records. Logs are deleted after 90 days, audit events after 365 days.</p>
<p>Your data is used only to run the service for you. Nothing leaves the instance except what your agents send to the providers you configure.</p>
<p>You can export or delete your account from the account page. Requests and questions: <a href="mailto:${e.contact}">${e.contact}</a>. Jurisdiction: ${e.jurisdiction}.</p>
<p><a href="/terms">Terms of service</a></p>`,
  );
}
