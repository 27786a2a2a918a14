// Whether the "new conversation" dialog is open: one flag the Shell renders and any page
// (or the `n` shortcut) sets.
import { useSyncExternalStore } from 'react';

let open = false;
const listeners = new Set<() => void>();
const set = (value: boolean) => {
  open = value;
  for (const l of listeners) l();
};

export const openNewConversation = () => set(true);
export const closeNewConversation = () => set(false);

export function useNewConversationOpen(): boolean {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => open,
  );
}
