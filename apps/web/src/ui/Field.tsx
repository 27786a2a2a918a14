import { type InputHTMLAttributes, type ReactNode, useId } from 'react';

/** A labelled input with an optional hint and the API's messages for this field. */
export function Field({
  label,
  hint,
  errors,
  ...input
}: InputHTMLAttributes<HTMLInputElement> & { label: ReactNode; hint?: ReactNode; errors?: string[] }) {
  const generated = useId();
  const id = input.id ?? generated;
  const hintId = `${id}-hint`;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        aria-describedby={hint || errors ? hintId : undefined}
        aria-invalid={errors && errors.length > 0 ? true : undefined}
        {...input}
      />
      {(hint || errors) && (
        <p id={hintId} className={errors?.length ? 'field-hint field-error' : 'field-hint'}>
          {errors?.length ? errors.join('; ') : hint}
        </p>
      )}
    </div>
  );
}
