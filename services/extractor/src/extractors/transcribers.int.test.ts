import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PermanentError, RetryableError, createLogger } from '@memstream/kit';
import { TranscriberSettings } from '../config.js';
import { DEFAULT_LIMITS, type ExtractContext } from '../kinds.js';
import { makeToneWav } from '../testing/media-fixtures.js';
import { createTranscriber, openAiTranscriber, whisperCppTranscriber } from './transcribers.js';

const run = promisify(execFile);

let dir: string;
/** 2.5 s of tone: the adapters only need audio, not speech, to be tested. */
let audio: string;

async function context(): Promise<ExtractContext> {
  const workDir = await mkdtemp(path.join(dir, 'work-'));
  return { limits: DEFAULT_LIMITS, log: createLogger('transcriber-test', { level: 'silent' }), workDir, signal: new AbortController().signal };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'memstream-stt-'));
  audio = await makeToneWav(dir, 2.5);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface SeenRequest {
  method: string | undefined;
  url: string | undefined;
  auth: string | undefined;
  model: string | File | null;
  format: string | File | null;
  file: File | null;
}

describe('OpenAI-compatible transcriber', () => {
  let server: Server;
  let baseUrl: string;
  let seen: SeenRequest[];
  let answer: (req: SeenRequest, n: number) => { status: number; headers?: Record<string, string>; body: string };

  /** The multipart body parsed the way a real server would (undici's FormData parser). */
  async function parse(req: IncomingMessage): Promise<SeenRequest> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const form = await new Request('http://x/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body: Buffer.concat(chunks) }).formData();
    const file = form.get('file');
    return { method: req.method, url: req.url, auth: req.headers.authorization, model: form.get('model'), format: form.get('response_format'), file: file instanceof File ? file : null };
  }

  beforeAll(async () => {
    server = createServer((req, res) => {
      parse(req).then(
        (r) => {
          seen.push(r);
          const a = answer(r, seen.length);
          res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
          res.end(a.body);
        },
        (err: unknown) => {
          res.writeHead(500);
          res.end(String(err));
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    seen = [];
    answer = (_r, n) => ({ status: 200, body: JSON.stringify({ text: ` piece ${n} ` }) });
  });

  it('posts the audio as multipart MP3 with model and bearer token, and returns the text', async () => {
    const t = openAiTranscriber({ baseUrl: `${baseUrl}/`, apiKey: 'sk-test', model: 'whisper-large-v3' });
    expect(await t.transcribe(audio, await context())).toBe('piece 1');
    expect(seen).toHaveLength(1);
    const r = seen[0]!;
    expect(r).toMatchObject({ method: 'POST', url: '/v1/audio/transcriptions', auth: 'Bearer sk-test', model: 'whisper-large-v3', format: 'json' });
    expect(r.file?.name).toBe('audio.mp3');
    // An MP3 frame starts with 11 set sync bits (or an ID3 tag), and 2.5 s at 32 kbit/s is ~10 KB.
    const head = new Uint8Array(await r.file!.arrayBuffer());
    expect(head[0] === 0xff || new TextDecoder().decode(head.subarray(0, 3)) === 'ID3').toBe(true);
    expect(r.file!.size).toBeGreaterThan(5_000);
    expect(r.file!.size).toBeLessThan(40_000);
  });

  it('sends no Authorization header without a key, and one request per piece', async () => {
    const t = openAiTranscriber({ baseUrl, model: 'whisper-1', segmentSeconds: 1 });
    expect(await t.transcribe(audio, await context())).toBe('piece 1\n\npiece 2\n\npiece 3');
    expect(seen.map((r) => r.auth)).toEqual([undefined, undefined, undefined]);
  });

  it('turns 429 into a retryable error that carries Retry-After', async () => {
    answer = () => ({ status: 429, headers: { 'retry-after': '7' }, body: '{"error":{"message":"rate limited"}}' });
    const err = await openAiTranscriber({ baseUrl, model: 'whisper-1' })
      .transcribe(audio, await context())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as RetryableError).message).toMatch(/429; retry after 7 s/);
    expect((err as RetryableError).retryAfterMs).toBe(7000);
  });

  it('turns 5xx into a retryable error', async () => {
    answer = () => ({ status: 503, body: 'overloaded' });
    await expect(openAiTranscriber({ baseUrl, model: 'whisper-1' }).transcribe(audio, await context())).rejects.toThrow(RetryableError);
  });

  it('turns 400 into a permanent error with the server’s reason', async () => {
    answer = () => ({ status: 400, body: '{"error":{"message":"Invalid file format."}}' });
    const err = await openAiTranscriber({ baseUrl, model: 'whisper-1' })
      .transcribe(audio, await context())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/\(400\).*Invalid file format/);
  });

  it('refuses a 200 answer without text', async () => {
    answer = () => ({ status: 200, body: '{"segments":[]}' });
    await expect(openAiTranscriber({ baseUrl, model: 'whisper-1' }).transcribe(audio, await context())).rejects.toThrow(/without a text field/);
  });

  it('treats a server that is not there as retryable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await expect(openAiTranscriber({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'whisper-1' }).transcribe(audio, await context())).rejects.toThrow(RetryableError);
  });
});

describe('whisper.cpp transcriber', () => {
  let bin: string;
  let log: string;
  const model = () => path.join(dir, 'ggml-fake.bin');

  beforeAll(async () => {
    bin = path.join(dir, 'whisper-cli');
    log = path.join(dir, 'whisper-calls.log');
    await writeFile(model(), 'not really a model');
    // Stands in for whisper-cli: records its arguments and the input's format, writes <-of>.txt.
    await writeFile(
      bin,
      `#!/bin/bash
set -e
of=''; f=''
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    -of) of="$2"; shift ;;
    -f) f="$2"; shift ;;
  esac
  shift
done
echo "\${args[*]}" >> '${log}'
ffprobe -v error -show_entries stream=sample_rate,channels,codec_name -of csv=p=0 "$f" >> '${log}'
printf 'words of %s\\n  second line  \\n' "$(basename "$f")" > "$of.txt"
`,
    );
    await chmod(bin, 0o755);
  });

  beforeEach(async () => {
    await rm(log, { force: true });
  });

  it('runs the CLI on 16 kHz mono WAV pieces with -m -f -l -nt -otxt -of and reads out.txt', async () => {
    const t = whisperCppTranscriber({ bin, model: model(), segmentSeconds: 2 });
    const text = await t.transcribe(audio, await context());
    expect(text).toBe('words of segment-0.wav second line\n\nwords of segment-1.wav second line');
    const lines = (await readFile(log, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(new RegExp(`^-m ${model()} -f \\S+/segment-0\\.wav -l auto -nt -np -otxt -of \\S+/out-0$`));
    expect(lines[1]).toBe('pcm_s16le,16000,1');
    expect(lines[3]).toBe('pcm_s16le,16000,1');
  });

  it('finds the binary on PATH by name', async () => {
    const t = createTranscriber(TranscriberSettings.parse({ TRANSCRIBER: 'whisper-cpp', WHISPER_CPP_MODEL: model(), WHISPER_CPP_LANGUAGE: 'en' }));
    expect(t.name).toBe('whisper-cpp');
    const PATH = process.env.PATH;
    process.env.PATH = `${dir}${path.delimiter}${PATH ?? ''}`;
    try {
      expect(await t.transcribe(audio, await context())).toBe('words of segment-0.wav second line');
    } finally {
      process.env.PATH = PATH;
    }
    expect(await readFile(log, 'utf8')).toContain(' -l en ');
  });

  it('fails permanently when the binary is missing', async () => {
    const t = whisperCppTranscriber({ bin: 'whisper-cli-that-does-not-exist', model: model() });
    await expect(t.transcribe(audio, await context())).rejects.toThrow(new PermanentError('whisper.cpp binary not found: set WHISPER_CPP_BIN'));
    const byPath = whisperCppTranscriber({ bin: path.join(dir, 'nope', 'whisper-cli'), model: model() });
    await expect(byPath.transcribe(audio, await context())).rejects.toThrow('whisper.cpp binary not found: set WHISPER_CPP_BIN');
  });

  it('fails permanently when the model file is missing or the CLI fails', async () => {
    await expect(whisperCppTranscriber({ bin, model: path.join(dir, 'missing.bin') }).transcribe(audio, await context())).rejects.toThrow(/model not found.*WHISPER_CPP_MODEL/);
    const failing = path.join(dir, 'failing-whisper');
    await writeFile(failing, "#!/bin/sh\necho 'whisper_init_from_file: failed to load model' >&2\nexit 3\n");
    await chmod(failing, 0o755);
    const err = await whisperCppTranscriber({ bin: failing, model: model() })
      .transcribe(audio, await context())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/failed to load model/);
  });
});

describe('createTranscriber', () => {
  it('chooses the adapter from the settings, pocketsphinx by default', () => {
    expect(createTranscriber(TranscriberSettings.parse({})).name).toBe('pocketsphinx');
    expect(createTranscriber(TranscriberSettings.parse({ TRANSCRIBER: 'openai', OPENAI_TRANSCRIBE_URL: 'http://localhost:8000/v1' })).name).toBe('openai');
    expect(() => createTranscriber(TranscriberSettings.parse({ TRANSCRIBER: 'whisper-cpp' }))).toThrow(/WHISPER_CPP_MODEL/);
    expect(() => TranscriberSettings.parse({ TRANSCRIBER: 'vosk' })).toThrow();
  });

  it('makes the test tone it relies on', async () => {
    const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', audio]);
    expect(Number(stdout)).toBeCloseTo(2.5, 1);
  });
});
