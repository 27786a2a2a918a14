// The console's build and dev server. `npm run build:web` writes dist/ (served by the server
// at /); `npm run dev:web` serves the sources with hot reload and proxies every server route
// to a running `npm start` (PADDOCK_DEV_API, default http://127.0.0.1:4000).
import react from '@vitejs/plugin-react';
import { defineConfig, type ProxyOptions } from 'vite';

const api = process.env['PADDOCK_DEV_API'] || 'http://127.0.0.1:4000';

// The server's CSRF check wants the request's Origin to be its own: the dev server is another
// origin, so the proxy presents the server's origin for requests that came from the dev page.
const proxy: ProxyOptions = {
  target: api,
  changeOrigin: true,
  configure: (p) => {
    p.on('proxyReq', (req) => {
      if (req.getHeader('origin')) req.setHeader('origin', new URL(api).origin);
      req.removeHeader('referer');
    });
  },
};

export default defineConfig({
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
    // Hashed file names: the server answers them with a year-long immutable cache.
    assetsDir: 'assets',
  },
  server: {
    port: 5173,
    proxy: {
      '/api': proxy,
      '/auth': proxy,
      '/health': proxy,
      '/llms.txt': proxy,
      '/llms-full.txt': proxy,
      '/skill': proxy,
      '/terms': proxy,
      '/privacy': proxy,
    },
  },
});
