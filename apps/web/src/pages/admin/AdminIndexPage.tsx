// `/admin`: the admin area starts at its users (the only list it has). Non-admins never get
// here: the route's `admin` access answers "Page not found" like every admin page (App.tsx).
import { Redirect } from '../../app/router';

export default function AdminIndexPage() {
  return <Redirect to="/admin/users" />;
}
