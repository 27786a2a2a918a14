// Image attachments are validated at ingest, before anything is stored: a media type of the
// allowlist, base64 that decodes, at most IMAGE_MAX_BYTES decoded, at most IMAGES_MAX images,
// and content whose signature matches the declared type (a PNG named image/jpeg is refused).
// Every refusal is a 422 with `errors.images` naming the image (conversations.images.test.ts).
import { AppError } from '../../http/errors.ts';
import type { TurnImage } from '../contracts.ts';
import { IMAGE_MAX_BYTES, IMAGE_MEDIA_TYPES, IMAGES_MAX } from './conversations.schemas.ts';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const SIGNATURES: Record<(typeof IMAGE_MEDIA_TYPES)[number], (b: Buffer) => boolean> = {
  'image/png': (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  'image/jpeg': (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  'image/gif': (b) => ['GIF87a', 'GIF89a'].includes(b.subarray(0, 6).toString('latin1')),
  'image/webp': (b) =>
    b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
};

function isAllowed(type: string): type is (typeof IMAGE_MEDIA_TYPES)[number] {
  return (IMAGE_MEDIA_TYPES as readonly string[]).includes(type);
}

export function decodeImages(input: { media_type: string; data: string }[] | undefined): TurnImage[] {
  if (!input || input.length === 0) return [];
  const refuse = (message: string) => AppError.validation({ images: [message] }, 'invalid images');
  if (input.length > IMAGES_MAX) throw refuse(`at most ${IMAGES_MAX} images per prompt`);
  return input.map((image, i) => {
    const type = image.media_type.toLowerCase();
    if (!isAllowed(type))
      throw refuse(`image ${i + 1}: media_type must be one of ${IMAGE_MEDIA_TYPES.join(', ')}`);
    if (image.data.length % 4 !== 0 || !BASE64.test(image.data))
      throw refuse(`image ${i + 1}: data must be base64`);
    const data = Buffer.from(image.data, 'base64');
    if (data.length === 0) throw refuse(`image ${i + 1}: data is empty`);
    if (data.length > IMAGE_MAX_BYTES)
      throw refuse(`image ${i + 1}: at most ${IMAGE_MAX_BYTES} bytes decoded`);
    if (!SIGNATURES[type](data)) throw refuse(`image ${i + 1}: content is not ${type}`);
    return { mediaType: type, data };
  });
}
