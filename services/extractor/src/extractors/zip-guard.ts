import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { PermanentError } from '@memstream/kit';
import type { ExtractLimits } from '../kinds.js';

/** Below this compressed size a single entry's ratio says little (a 1 KB run of spaces is not a bomb). */
const ENTRY_RATIO_MIN_COMPRESSED = 1024;

const MB = 1024 * 1024;
const mb = (n: number) => `${Math.round(n / MB)} MB`;

function openZip(path: string, autoClose = true): Promise<ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(path, { lazyEntries: true, autoClose }, (err, zip) => {
      // Not a zip at all, or a central directory that does not add up: the Office parsers would fail too.
      if (err || !zip) reject(new PermanentError('corrupt Office file'));
      else resolve(zip);
    });
  });
}

/**
 * Walk the central directory one entry at a time (lazyEntries), without decompressing anything.
 * `visit` returns true to stop early. The zip is closed at the end unless `keepOpen` (and always
 * on an error).
 */
function walkEntries(zip: ZipFile, visit: (entry: Entry) => boolean | Promise<boolean>, keepOpen = false): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      if (zip.isOpen && (err || !keepOpen)) zip.close();
      if (err) reject(err instanceof PermanentError ? err : new PermanentError('corrupt Office file'));
      else resolve();
    };
    zip.on('error', finish);
    zip.on('end', () => finish());
    zip.on('entry', (entry: Entry) => {
      // Through a promise so a synchronous throw in `visit` rejects instead of escaping the emitter.
      Promise.resolve()
        .then(() => visit(entry))
        .then(
          (stop) => (stop ? finish() : zip.readEntry()),
          (err: unknown) => finish(err),
        );
    });
    zip.readEntry();
  });
}

/**
 * Refuse zip bombs before any Office parser opens the file: DOCX, PPTX and XLSX parsers inflate
 * parts into memory, so a few hundred KB that expand to gigabytes would take the process down.
 * Only the central directory is read. The sizes there are the archive's own claims; an archive
 * that lies about them is caught later by yauzl's size validation (readZipEntry) or by the
 * sandbox's RSS watchdog, which is the backstop for every parser.
 */
export async function checkZip(path: string, limits: ExtractLimits): Promise<void> {
  const zip = await openZip(path);
  if (zip.entryCount > limits.maxZipEntries) {
    zip.close();
    throw new PermanentError(`zip bomb: ${zip.entryCount} entries, over the limit of ${limits.maxZipEntries} (maxZipEntries)`);
  }
  const fileSize = Math.max(1, zip.fileSize);
  let expanded = 0;
  let entries = 0;
  await walkEntries(zip, (entry) => {
    entries++;
    // entryCount comes from the end record; count again in case the directory disagrees with it.
    if (entries > limits.maxZipEntries) {
      throw new PermanentError(`zip bomb: more than ${limits.maxZipEntries} entries (maxZipEntries)`);
    }
    expanded += entry.uncompressedSize;
    if (expanded > limits.maxZipExpandedBytes) {
      throw new PermanentError(`zip bomb: expands to at least ${mb(expanded)}, over the limit of ${mb(limits.maxZipExpandedBytes)} (maxZipExpandedBytes)`);
    }
    if (entry.compressedSize > ENTRY_RATIO_MIN_COMPRESSED && entry.uncompressedSize / entry.compressedSize > limits.maxZipRatio * 5) {
      const ratio = Math.round(entry.uncompressedSize / entry.compressedSize);
      throw new PermanentError(`zip bomb: ${entry.fileName} expands ${ratio}×, over the per-entry limit of ${limits.maxZipRatio * 5}× (maxZipRatio × 5)`);
    }
    return false;
  });
  if (expanded / fileSize > limits.maxZipRatio) {
    throw new PermanentError(`zip bomb: expands ${Math.round(expanded / fileSize)}× (${mb(expanded)} from ${mb(fileSize)}), over the limit of ${limits.maxZipRatio}× (maxZipRatio)`);
  }
}

/**
 * One entry of a zip, or null when there is none of that name. Streamed with a hard cap, so a
 * part that is bigger than it claims (or than we will hold) fails instead of filling memory.
 */
export async function readZipEntry(path: string, name: string, maxBytes: number): Promise<Buffer | null> {
  const zip = await openZip(path);
  let found: Buffer | null = null;
  await walkEntries(zip, async (entry) => {
    if (entry.fileName !== name) return false;
    if (entry.uncompressedSize > maxBytes) {
      throw new PermanentError(`${name} is ${mb(entry.uncompressedSize)}, over the ${mb(maxBytes)} a single part may have`);
    }
    found = await readCapped(zip, entry, maxBytes);
    return true;
  });
  return found;
}

/** Several entries of one zip, read by name: the central directory is read once, not per entry. */
export interface ZipReader {
  /** Like readZipEntry: null when absent, PermanentError past `maxBytes`. */
  read(name: string, maxBytes: number): Promise<Buffer | null>;
  close(): void;
}

/**
 * Open a zip for reading entries by name. The index holds every entry, so call it on archives
 * that passed checkZip (whose entry count is bounded).
 */
export async function openZipReader(path: string): Promise<ZipReader> {
  const zip = await openZip(path, false);
  const entries = new Map<string, Entry>();
  await walkEntries(
    zip,
    (entry) => {
      entries.set(entry.fileName, entry);
      return false;
    },
    true,
  );
  return {
    async read(name, maxBytes) {
      const entry = entries.get(name);
      if (!entry) return null;
      if (entry.uncompressedSize > maxBytes) {
        throw new PermanentError(`${name} is ${mb(entry.uncompressedSize)}, over the ${mb(maxBytes)} a single part may have`);
      }
      return readCapped(zip, entry, maxBytes);
    },
    close() {
      if (zip.isOpen) zip.close();
    },
  };
}

function readCapped(zip: ZipFile, entry: Entry, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err) return reject(new PermanentError(`corrupt Office file: ${entry.fileName}: ${err.message}`));
      const chunks: Buffer[] = [];
      let total = 0;
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > maxBytes) {
          stream.destroy();
          reject(new PermanentError(`${entry.fileName} expands past ${mb(maxBytes)}, more than a single part may have`));
          return;
        }
        chunks.push(chunk);
      });
      // yauzl validates the inflated size against the directory's claim and errors on a mismatch.
      stream.on('error', (e: Error) => reject(new PermanentError(`corrupt Office file: ${entry.fileName}: ${e.message}`)));
      stream.on('end', () => resolve(Buffer.concat(chunks, total)));
    });
  });
}
