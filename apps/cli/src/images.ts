// `--image FILE`: read, typed by its first bytes (not its name), and checked against the
// server's limits before anything is sent, so a wrong file is named at once.
import { readFileSync } from 'node:fs';
import { CliError } from './errors.ts';

export const IMAGES_MAX = 4;
export const IMAGE_MAX_BYTES = 5 * 1024 * 1024;

export interface ImageInput {
  media_type: string;
  data: string;
}

export function sniffMediaType(bytes: Buffer): string | null {
  const ascii = (from: number, to: number) => bytes.subarray(from, to).toString('latin1');
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10])))
    return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (ascii(0, 6) === 'GIF87a' || ascii(0, 6) === 'GIF89a') return 'image/gif';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  return null;
}

export function readImages(paths: string[]): ImageInput[] {
  if (paths.length > IMAGES_MAX) throw new CliError(`at most ${IMAGES_MAX} images per prompt`);
  return paths.map((path) => {
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      throw new CliError(
        `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    const mediaType = sniffMediaType(bytes);
    if (!mediaType) throw new CliError(`${path} is not a PNG, JPEG, GIF or WebP image`);
    if (bytes.length > IMAGE_MAX_BYTES) throw new CliError(`${path} is larger than 5 MiB`);
    return { media_type: mediaType, data: bytes.toString('base64') };
  });
}
