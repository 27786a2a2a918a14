export default function DashboardPage() {
  return (
    <section className="page">
      <h1>Conversations</h1>
    </section>
  );
}
