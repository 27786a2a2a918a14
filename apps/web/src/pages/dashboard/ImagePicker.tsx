// Image attachments of a prompt: PNG, JPEG, GIF or WebP, at most 4, each at most 5 MiB
// (the server's limits, docs/api.md). Read into base64 in the browser; never uploaded
// anywhere but with the prompt.
import { useId, useState } from 'react';

export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
export const IMAGES_MAX = 4;
export const IMAGE_MAX_BYTES = 5 * 1024 * 1024;

export interface PickedImage {
  /** Stable identity for the list while picking. */
  key: string;
  name: string;
  media_type: string;
  /** base64, no data: prefix */
  data: string;
  size: number;
  preview: string;
}

function read(file: File): Promise<PickedImage> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve({
        key: crypto.randomUUID(),
        name: file.name,
        media_type: file.type,
        data: url.slice(url.indexOf(',') + 1),
        size: file.size,
        preview: url,
      });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

export function ImagePicker({
  images,
  onChange,
  errors,
}: {
  images: PickedImage[];
  onChange: (images: PickedImage[]) => void;
  errors?: string[] | undefined;
}) {
  const id = useId();
  const [problem, setProblem] = useState<string | null>(null);
  const add = async (files: FileList | null) => {
    if (!files) return;
    const problems: string[] = [];
    const next = [...images];
    for (const file of Array.from(files)) {
      if (next.length >= IMAGES_MAX) {
        problems.push(`at most ${IMAGES_MAX} images per prompt`);
        break;
      }
      if (!IMAGE_TYPES.includes(file.type)) problems.push(`${file.name}: not a PNG, JPEG, GIF or WebP image`);
      else if (file.size > IMAGE_MAX_BYTES) problems.push(`${file.name}: larger than 5 MiB`);
      else next.push(await read(file));
    }
    setProblem(problems.length ? problems.join('; ') : null);
    onChange(next);
  };
  const shown = problem ?? errors?.join('; ');
  return (
    <div className="field">
      <label htmlFor={id}>Images (optional)</label>
      <input
        id={id}
        type="file"
        accept={IMAGE_TYPES.join(',')}
        multiple
        disabled={images.length >= IMAGES_MAX}
        onChange={(e) => {
          void add(e.target.files);
          e.target.value = '';
        }}
      />
      <p className={shown ? 'field-hint field-error' : 'field-hint'}>
        {shown ?? `Up to ${IMAGES_MAX} PNG, JPEG, GIF or WebP images of at most 5 MiB each.`}
      </p>
      {images.length > 0 && (
        <ul className="thumbs">
          {images.map((img, i) => (
            <li key={img.key} className="thumb">
              <img src={img.preview} alt={img.name} />
              <button
                type="button"
                className="btn btn-small"
                onClick={() => onChange(images.filter((_, j) => j !== i))}
                aria-label={`Remove ${img.name}`}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
