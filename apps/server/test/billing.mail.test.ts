// The billing lifecycle mails end to end: a signed webhook or the trial sweeper enqueues, the
// real job runner renders and sends through nodemailer to a real SMTP server on loopback
// (helpers/smtp.ts). One test per mail, the send-time re-check, and EMAIL_DELIVERY=none.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { trialSweeperJob } from '../src/billing/trial-sweeper.job.ts';
import type { JobRunner } from '../src/jobs/worker.ts';
import { startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import {
  deliver,
  event,
  insertBillingRow,
  invoiceObject,
  newId,
  queuedBillingMails,
  subscriptionObject,
  WEBHOOK_SECRET,
} from './helpers/billing-events.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import { createSmtpCapture, type SmtpCapture } from './helpers/smtp.ts';

const DAY = 86_400_000;
const MIN = 60_000;
const ago = (ms: number) => new Date(Date.now() - ms);

let smtp: SmtpCapture;
let t: TestApp;
let jobs: JobRunner | undefined;
before(async () => {
  smtp = await createSmtpCapture();
  t = await buildTestApp({
    env: {
      BILLING_ENABLED: 'true',
      BILLING_WEBHOOK_SECRET: WEBHOOK_SECRET,
      EMAIL_DELIVERY: '',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(smtp.port),
      PUBLIC_URL: 'http://paddock.example.com',
      SUPPORT_EMAIL: 'help@example.com',
    },
  });
  jobs = await startJobs(t);
});
after(async () => {
  await jobs?.stop();
  jobs = undefined;
  await t?.close();
  await smtp?.stop();
});

async function subscriber(status: 'active' | 'past_due') {
  const user = await createVerifiedUser(t.deps.db);
  const sub = newId('sub');
  const customer = newId('cus');
  await insertBillingRow(t.deps.db, user.id, {
    status,
    customerId: customer,
    subscriptionId: sub,
    stateAt: ago(60 * MIN),
  });
  return { user, sub, customer };
}

const BILLING_LINK = 'http://paddock.example.com/account/billing';

describe('billing lifecycle mails', () => {
  it('sends "payment failed" on invoice.payment_failed, linking the billing page', async () => {
    const { user, sub, customer } = await subscriber('active');
    const res = await deliver(
      t,
      event('invoice.payment_failed', invoiceObject({ subscription: sub, customer }), ago(MIN)),
    );
    assert.equal(res.statusCode, 200, res.body);
    const mail = await smtp.waitFor(user.email, /Your Paddock payment failed/);
    assert.ok(mail.decoded.includes(BILLING_LINK), mail.decoded);
    assert.match(mail.decoded, /help@example\.com/);
  });

  it('sends "payment action required" on invoice.payment_action_required', async () => {
    const { user, sub, customer } = await subscriber('active');
    await deliver(
      t,
      event('invoice.payment_action_required', invoiceObject({ subscription: sub, customer }), ago(MIN)),
    );
    const mail = await smtp.waitFor(user.email, /needs your confirmation/);
    assert.ok(mail.decoded.includes(BILLING_LINK));
  });

  it('sends "payment recovered" when dunning ends with invoice.paid', async () => {
    const { user, sub, customer } = await subscriber('past_due');
    await deliver(
      t,
      event('invoice.paid', invoiceObject({ subscription: sub, customer, status: 'paid' }), ago(MIN)),
    );
    await smtp.waitFor(user.email, /Your Paddock payment went through/);
  });

  it('sends "subscription canceled" on customer.subscription.deleted', async () => {
    const { user, sub, customer } = await subscriber('active');
    await deliver(
      t,
      event(
        'customer.subscription.deleted',
        subscriptionObject({ id: sub, customer, status: 'canceled' }),
        ago(MIN),
      ),
    );
    const mail = await smtp.waitFor(user.email, /subscription has been canceled/);
    assert.ok(mail.decoded.includes(BILLING_LINK));
  });

  it('sends "trial ending" 3 days before and "trial expired" after, from the sweeper', async () => {
    const now = new Date();
    const ending = await createVerifiedUser(t.deps.db);
    const endsAt = new Date(now.getTime() + 2 * DAY);
    await insertBillingRow(t.deps.db, ending.id, { status: 'trialing', trialEndsAt: endsAt });
    const expired = await createVerifiedUser(t.deps.db);
    await insertBillingRow(t.deps.db, expired.id, {
      status: 'trialing',
      trialEndsAt: new Date(now.getTime() - MIN),
    });
    await trialSweeperJob.run({ deps: t.deps, now, dryRun: false, print: () => {} });
    const endingMail = await smtp.waitFor(ending.email, /trial ends in 3 days/);
    assert.ok(endingMail.decoded.includes(endsAt.toISOString().slice(0, 10)), 'names the day the trial ends');
    assert.ok(endingMail.decoded.includes(BILLING_LINK));
    await smtp.waitFor(expired.email, /Your Paddock trial has ended/);
  });

  it('re-checks at send time: a payment-failed mail is dropped once the payment recovered', async () => {
    await jobs?.stop();
    jobs = undefined;
    const { user, sub, customer } = await subscriber('active');
    await deliver(
      t,
      event('invoice.payment_failed', invoiceObject({ subscription: sub, customer }), ago(2 * MIN)),
    );
    await deliver(
      t,
      event('invoice.paid', invoiceObject({ subscription: sub, customer, status: 'paid' }), ago(MIN)),
    );
    const queued = (await queuedBillingMails(t.deps.db))
      .filter((m) => m.userId === user.id)
      .map((m) => m.kind);
    assert.deepEqual(queued, ['payment_failed', 'payment_recovered']);
    jobs = await startJobs(t);
    await smtp.waitFor(user.email, /payment went through/);
    const deadline = Date.now() + 10_000;
    while ((await queuedBillingMails(t.deps.db)).some((m) => m.userId === user.id)) {
      assert.ok(Date.now() < deadline, 'the queue should drain');
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(
      smtp.mails.filter((m) => m.to.includes(user.email)).map((m) => m.subject),
      ['Your Paddock payment went through'],
    );
    assert.ok(t.logs.some((l) => l.includes('billing mail dropped') && l.includes(user.id)));
  });

  it('enqueues nothing under EMAIL_DELIVERY=none', async () => {
    const none = await buildTestApp({
      database: t.database,
      env: { BILLING_ENABLED: 'true', BILLING_WEBHOOK_SECRET: WEBHOOK_SECRET, EMAIL_DELIVERY: 'none' },
    });
    try {
      const { user, sub, customer } = await subscriber('active');
      const res = await deliver(
        none,
        event('invoice.payment_failed', invoiceObject({ subscription: sub, customer }), ago(MIN)),
      );
      assert.equal(res.json().outcome, 'applied');
      assert.deepEqual(
        (await queuedBillingMails(t.deps.db)).filter((m) => m.userId === user.id),
        [],
      );
    } finally {
      await none.app.close();
    }
  });
});
