import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Plugin } from 'esbuild';

/** Bumped when what a bundle contains or where it is laid out changes. */
const RECIPE = 'b2';

/**
 * The services compiled ahead of time, one ES module per service (esbuild, code split), so a
 * process starts on plain `node` instead of `node --import tsx`.
 *
 * Why: tsx resolves and loads every module of a process through Node's off-thread loader hooks.
 * A service imports ~1,500 modules (zod, pino, OpenTelemetry, the NATS client, the stores), and
 * starting one under tsx cost 1.5–3 CPU-seconds against ~0.3 s as JavaScript; a stack of nine
 * processes started ~25 times in the test suite, and every restart of the launcher's, paid it.
 *
 * What is bundled: the workspace's own TypeScript (packages/*, services/*). Everything from
 * node_modules stays outside, imported by its resolved absolute path, so each package keeps its
 * own dependencies (pnpm's strict layout), native addons load as before, and a package is one
 * instance per process. `import.meta.url` / `dirname` / `filename` in workspace code are replaced
 * by the original file's, so paths computed from them (the console's assets, the static model,
 * the extractor's sandbox child, the chunker's worker) are the same as under tsx. Dynamic
 * imports stay lazy (code splitting). Source maps point stack traces at the .ts files.
 *
 * Bundles are cached under node_modules/.cache/memstream-services/<hash of the sources>, built
 * once per change of any non-test .ts file of the workspace, a package.json or the lockfile.
 */
export async function serviceBundles(root: string, services: readonly string[]): Promise<string> {
  const hash = sourceHash(root, services);
  const dir = path.join(root, 'node_modules', '.cache', 'memstream-services', hash);
  if (existsSync(path.join(dir, 'complete'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  // Loaded here, not at the top: the CLI's other commands never need it.
  const { build } = await import('esbuild');
  try {
    await build({
      absWorkingDir: root,
      // The worker host (./host.ts) beside the services: it loads their bundled entries, so the code they share loads once.
      entryPoints: [...services.map((s) => path.join(root, 'services', s, 'src', 'main.ts')), path.join(root, HOST_ENTRY)],
      outbase: root,
      outdir: tmp,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      // As Node itself resolves: no "module" condition or field for the packages left outside.
      conditions: ['node'],
      mainFields: ['main'],
      sourcemap: 'linked',
      logLevel: 'silent',
      plugins: [workspaceOnly(root)],
    });
    writeFileSync(path.join(tmp, 'complete'), `${new Date().toISOString()}\n`);
    try {
      renameSync(tmp, dir);
    } catch (err) {
      // Another process (a parallel test file) finished the same bundles first: use theirs.
      if (!existsSync(path.join(dir, 'complete'))) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  pruneOld(path.dirname(dir), dir);
  return dir;
}

/** Bundles of earlier sources, and builds that died half-way, once an hour old (a run may still use a recent one). */
function pruneOld(parent: string, keep: string): void {
  for (const name of readdirSync(parent)) {
    const p = path.join(parent, name);
    try {
      if (p !== keep && Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
    } catch {
      // removed by another process meanwhile
    }
  }
}

/** The worker host's source, from the repository root (./host.ts). */
export const HOST_ENTRY = path.join('packages', 'cli', 'src', 'host.ts');

/** The bundled entry of one service in `dir`, as serviceBundles lays it out. */
export function bundledEntry(dir: string, service: string): string {
  return path.join(dir, 'services', service, 'src', 'main.mjs');
}

/** The bundled worker host in `dir`. */
export function bundledHost(dir: string): string {
  return path.join(dir, HOST_ENTRY.replace(/\.ts$/, '.mjs'));
}

/**
 * Workspace TypeScript in, node_modules out: a bare import that is not `@memstream/*` becomes an
 * external import of the file Node would load, and workspace files keep their own import.meta.
 */
function workspaceOnly(root: string): Plugin {
  return {
    name: 'memstream-workspace-only',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === 'inner' || args.path.startsWith('node:') || args.path.startsWith('@memstream/')) return undefined;
        const r = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: 'inner' });
        if (r.errors.length > 0) return { errors: r.errors };
        // A Node built-in named without `node:` (esbuild marks it external, with no path of its own).
        if (r.external || !path.isAbsolute(r.path)) return { path: args.path, external: true };
        return { path: r.path, external: true };
      });
      b.onLoad({ filter: /\.ts$/ }, (args) => {
        if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const source = readFileSync(args.path, 'utf8');
        if (!source.includes('import.meta.')) return { contents: source, loader: 'ts' };
        const contents = source
          .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
          .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(args.path)))
          .replaceAll('import.meta.filename', JSON.stringify(args.path));
        return { contents, loader: 'ts', resolveDir: path.dirname(args.path) };
      });
    },
  };
}

/** A hash of everything a bundle is made from: the workspace's non-test sources and manifests. */
function sourceHash(root: string, services: readonly string[]): string {
  const h = createHash('sha256').update(`${RECIPE}\0${process.version}\0${services.join(',')}\0`);
  const files: string[] = [path.join(root, 'pnpm-lock.yaml'), path.join(root, 'tsconfig.base.json')];
  for (const top of ['packages', 'services']) {
    const base = path.join(root, top);
    for (const name of readdirSync(base)) {
      files.push(path.join(base, name, 'package.json'));
      walk(path.join(base, name, 'src'), files);
    }
  }
  for (const f of files.sort()) {
    if (!existsSync(f)) continue;
    h.update(f).update('\0').update(readFileSync(f)).update('\0');
  }
  return h.digest('hex').slice(0, 16);
}

function walk(dir: string, out: string[]): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir)) {
    const p = path.join(dir, e);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.(ts|json)$/.test(e) && !/\.test\.ts$/.test(e)) out.push(p);
  }
}
