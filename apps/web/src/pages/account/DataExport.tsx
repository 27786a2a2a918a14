// The account's data export (docs/data-export.md): ask for one, watch it being built, download
// the gzipped JSON while it lasts. The server builds one at a time and mails when it is ready;
// this view polls the latest export while it is pending or building.
import { useEffect, useState } from 'react';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { relativeTime } from '../../ui/time';
import { Section } from '../config/editors';

const POLL_MS = 2000;

function humanBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}

export function DataExport() {
  const list = useApi((signal) => api.get('/api/account/exports', { signal }), []);
  const [error, setError] = useState<unknown>(null);
  const [asking, setAsking] = useState(false);
  const latest = list.data?.data[0];
  const building = latest?.status === 'pending' || latest?.status === 'building';

  // biome-ignore lint/correctness/useExhaustiveDependencies: each answer (list.data) arms the next poll while it builds
  useEffect(() => {
    if (!building) return;
    const timer = setTimeout(list.reload, POLL_MS);
    return () => clearTimeout(timer);
  }, [building, list.reload, list.data]);

  const ask = async () => {
    setError(null);
    setAsking(true);
    try {
      await api.post('/api/account/exports');
      list.reload();
    } catch (err) {
      setError(err);
    } finally {
      setAsking(false);
    }
  };

  return (
    <Section
      title="Data export"
      hint="Everything your account holds, as gzipped JSON: environments, vaults and agents as manifests `paddock apply` takes again (secret values are never included), conversations with their turns and logs, and your audit log. It is built in the background, and we email you when it is ready; it can be downloaded for 7 days."
    >
      <ErrorNotice error={list.error ?? error} />
      {latest && (
        <div className="notice" role="status" aria-live="polite">
          {building && (
            <p>Your export is being built. You can leave this page: we email you when it is ready.</p>
          )}
          {latest.status === 'ready' && latest.download_url && (
            <p>
              Your export of {new Date(latest.created_at).toLocaleString()} is ready
              {latest.size_bytes !== null ? ` (${humanBytes(latest.size_bytes)})` : ''}.{' '}
              <a href={latest.download_url} download>
                Download it
              </a>
              {latest.expires_at && (
                <span className="muted" title={latest.expires_at}>
                  {' '}
                  (available until {relativeTime(latest.expires_at)})
                </span>
              )}
            </p>
          )}
          {latest.status === 'failed' && (
            <p>Your last export failed: {latest.failure_reason ?? 'no reason given'}.</p>
          )}
          {latest.status === 'expired' && <p>Your last export has expired. Ask for a new one below.</p>}
        </div>
      )}
      <div className="form-actions">
        <button type="button" className="btn btn-primary" onClick={ask} disabled={asking || building}>
          {building ? 'Building export…' : 'Export my data'}
        </button>
      </div>
    </Section>
  );
}
