import { ApiError, errorMessage } from '../api/client';

/** An API error as the person should read it: its message, and the fields it names. */
export function ErrorNotice({ error }: { error: unknown }) {
  if (!error) return null;
  const fields = error instanceof ApiError ? error.body.errors : undefined;
  return (
    <div className="notice notice-error" role="alert">
      <p>{errorMessage(error)}</p>
      {fields && (
        <ul>
          {Object.entries(fields).map(([field, messages]) => (
            <li key={field}>
              <code>{field}</code>: {messages.join('; ')}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
