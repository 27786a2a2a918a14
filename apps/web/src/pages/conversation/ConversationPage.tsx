import { useParams } from '../../app/router';

export default function ConversationPage() {
  const { id } = useParams();
  return (
    <section className="page">
      <h1>Conversation {id}</h1>
    </section>
  );
}
