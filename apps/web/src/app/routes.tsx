// Every page of the console, in one table. To add a page:
//   1. write `pages/<area>/<Name>Page.tsx` exporting a default component;
//   2. add `{ path, access, title, page: lazy(() => import(...)) }` below (`:name` segments
//      reach the page through useParams());
//   3. if it belongs in the navigation, add it to NAV in app/Shell.tsx.
// Pages load lazily: each is its own chunk, so the first load carries only what it shows.
import { type ComponentType, type LazyExoticComponent, lazy } from 'react';

export type Access = 'public' | 'signed-out' | 'signed-in' | 'admin';

export interface PageRoute {
  path: string;
  access: Access;
  title: string;
  page: LazyExoticComponent<ComponentType>;
}

export const ROUTES: readonly PageRoute[] = [
  // Signed-out visitors see the home page at /, signed-in people the dashboard (App.tsx).
  {
    path: '/sign-in',
    access: 'signed-out',
    title: 'Sign in',
    page: lazy(() => import('../pages/auth/SignInPage')),
  },
  {
    path: '/sign-up',
    access: 'signed-out',
    title: 'Create an account',
    page: lazy(() => import('../pages/auth/SignUpPage')),
  },
  {
    path: '/verify-email',
    access: 'public',
    title: 'Confirm your email address',
    page: lazy(() => import('../pages/auth/VerifyPendingPage')),
  },
  {
    path: '/forgot-password',
    access: 'public',
    title: 'Forgot password',
    page: lazy(() => import('../pages/auth/ForgotPasswordPage')),
  },
  {
    path: '/reset-password',
    access: 'public',
    title: 'Choose a new password',
    page: lazy(() => import('../pages/auth/ResetPasswordPage')),
  },
  {
    path: '/conversations',
    access: 'signed-in',
    title: 'Conversations',
    page: lazy(() => import('../pages/dashboard/DashboardPage')),
  },
  {
    path: '/conversations/:id',
    access: 'signed-in',
    title: 'Conversation',
    page: lazy(() => import('../pages/conversation/ConversationPage')),
  },
  // Configuration, account and admin (docs/web.md "Configuration", "Account", "Admin").
  {
    path: '/environments',
    access: 'signed-in',
    title: 'Environments',
    page: lazy(() => import('../pages/config/EnvironmentsPage')),
  },
  {
    path: '/environments/new',
    access: 'signed-in',
    title: 'New environment',
    page: lazy(() => import('../pages/config/EnvironmentFormPage')),
  },
  {
    path: '/environments/:id',
    access: 'signed-in',
    title: 'Environment',
    page: lazy(() => import('../pages/config/EnvironmentFormPage')),
  },
  {
    path: '/vaults',
    access: 'signed-in',
    title: 'Vaults',
    page: lazy(() => import('../pages/config/VaultsPage')),
  },
  {
    path: '/vaults/:id',
    access: 'signed-in',
    title: 'Vault',
    page: lazy(() => import('../pages/config/VaultPage')),
  },
  {
    path: '/agents',
    access: 'signed-in',
    title: 'Agents',
    page: lazy(() => import('../pages/config/AgentsPage')),
  },
  {
    path: '/agents/new',
    access: 'signed-in',
    title: 'New agent',
    page: lazy(() => import('../pages/config/AgentFormPage')),
  },
  {
    path: '/agents/:id',
    access: 'signed-in',
    title: 'Agent',
    page: lazy(() => import('../pages/config/AgentFormPage')),
  },
  {
    path: '/manifest',
    access: 'signed-in',
    title: 'Export / import',
    page: lazy(() => import('../pages/config/ManifestPage')),
  },
  {
    path: '/account',
    access: 'signed-in',
    title: 'Account',
    page: lazy(() => import('../pages/account/AccountPage')),
  },
  {
    path: '/account/security',
    access: 'signed-in',
    title: 'Security',
    page: lazy(() => import('../pages/account/SecurityPage')),
  },
  {
    // BILLING_ENABLED only: otherwise the server answers this path with a 404 (console.ts).
    path: '/account/billing',
    access: 'signed-in',
    title: 'Billing',
    page: lazy(() => import('../pages/account/BillingPage')),
  },
  {
    path: '/account/audit',
    access: 'signed-in',
    title: 'Audit log',
    page: lazy(() => import('../pages/account/AuditPage')),
  },
  {
    path: '/admin',
    access: 'admin',
    title: 'Admin',
    page: lazy(() => import('../pages/admin/AdminIndexPage')),
  },
  {
    path: '/admin/users',
    access: 'admin',
    title: 'Users',
    page: lazy(() => import('../pages/admin/AdminUsersPage')),
  },
  {
    path: '/admin/users/:id',
    access: 'admin',
    title: 'User',
    page: lazy(() => import('../pages/admin/AdminUserPage')),
  },
  {
    path: '/admin/sandboxes',
    access: 'admin',
    title: 'Untracked sandboxes',
    page: lazy(() => import('../pages/admin/AdminSandboxesPage')),
  },
  {
    // Billing on only: the page answers "Page not found" otherwise (BILLING_ENABLED).
    path: '/admin/billing',
    access: 'admin',
    title: 'Billing (admin)',
    page: lazy(() => import('../pages/admin/AdminBillingPage')),
  },
  {
    path: '/admin/conversations/:id',
    access: 'admin',
    title: 'Conversation (admin)',
    page: lazy(() => import('../pages/admin/AdminConversationPage')),
  },
];
