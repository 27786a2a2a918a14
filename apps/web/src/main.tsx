import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { SessionProvider } from './api/session';
import { App } from './app/App';
import { installShortcuts } from './app/shortcuts';
import './styles.css';

installShortcuts();
createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <SessionProvider>
      <App />
    </SessionProvider>
  </StrictMode>,
);
