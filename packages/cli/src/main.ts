import path from 'node:path';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { build as prettyStream } from 'pino-pretty';
import { connectBus, ensureTopology } from '@memstream/bus';
import { createLogger, errorMessage } from '@memstream/kit';
import { openDocumentViews, SqliteDocumentViews, MongoDocumentViews, type DocumentViews } from '@memstream/views';
import { loadConfig, type Config } from './config.js';
import { LAUNCHER_NATS, startNatsServer, type NatsServerHandle } from './nats-server.js';
import { REPO_ROOT, SERVICES, isHost, launcherTuning, processStopOrder, spawnLauncherLayout, spawnProcess, stopProcess, type ServiceName, type ServiceProcess } from './stack.js';
import { serviceBundles } from './bundle.js';
import { keepEarlierDefaultModel } from './earlier-model.js';
import { compareViews, progressBar, rebuildViews } from './replay.js';
import { REPLAY_USAGE, replayEmbed, replayIndex, replayMemories, replayRedrive, runningNatsUrl } from './replay-commands.js';
import { importCommand } from './import/command.js';
import { apiTarget } from './target.js';
import { commandArgs } from './args.js';

const USAGE = `memstream — a self-hostable content memory service

  ./memstream up                       start nats-server (unless NATS_URL is set) and all seven services
  ./memstream test [vitest args]       typecheck and run every test
  ./memstream replay projection        rebuild the document view from the log into a new store and
        [--swap]                       compare it with the live one; --swap replaces the live view
                                       with the rebuilt one (stop memstream first)
  ./memstream replay index [--dry-run]  rebuild the chunk index from the log and compare it with the
        [--swap]                       live one; --swap makes the rebuilt index live (stop memstream first)
  ./memstream replay memories [--swap] rebuild the memory store from the MEMORY log (no extractor
                                       runs) and compare it with the live one; --swap makes it live
  ./memstream replay redrive --from <extract|chunk|embed|index>
        [--all | --tag T | --filter JSON | --failed] [--dry-run] [--yes] [--no-wait]
                                       process the selected documents again from a stage, as a new
                                       revision (memstream must be up); waits until they are done
  ./memstream replay embed --model <static | hashed:DIM | openai:MODEL[:DIM] | onnx:DIR> [--dry-run] [--yes]
                                       embed every chunk with a new model into a shadow index, then
                                       switch search and new documents to it (memstream must be up)
  ./memstream import PATH... [--tag T] [--metadata JSON] [--wait] [--concurrency N] [--url URL] [--key KEY]
                                       send files, folders, .jsonl and .urls lists or URLs to a running
                                       memstream, with progress; a second run sends only what changed
  ./memstream mcp [--url URL] [--key KEY]
                                       an MCP server on stdio for desktop clients, bridged to a running
                                       memstream's /mcp (docs/mcp.md)
  ./memstream bench [ingest|load|search|retrieval|scaling|extract-pdf|conversations|memorizer] [flags]
                                       benchmarks, each on a private stack or data (README: Benchmarks)

Configuration (environment): MEMSTREAM_PORT (8787), MEMSTREAM_HOST (127.0.0.1), MEMSTREAM_API_KEY,
MEMSTREAM_DATA_DIR (./.memstream), NATS_URL, MONGODB_URL, QDRANT_URL, LOG_LEVEL (info), MEMSTREAM_URL (import, mcp).`;

const UP_USAGE = `usage: ./memstream up

Starts nats-server (unless NATS_URL is set) and the seven services, supervises them (a process
that exits is started again, the broker on the same port and store), and stops them in order on
Ctrl-C or SIGTERM. It takes no flags: configuration is the environment (README: Configuration).`;

const REPLAY_HELP = `usage: ./memstream replay <projection|index|memories|redrive|embed> [flags]

${Object.values(REPLAY_USAGE).map((u) => u.split('\n')[0]!.replace(/^usage: /, '  ')).join('\n')}

./memstream replay <target> --help describes each.`;

function dataDir(config: Config): string {
  return path.resolve(config.MEMSTREAM_INVOKE_CWD ?? process.cwd(), config.MEMSTREAM_DATA_DIR);
}

/** The admin key: from the environment, else the one kept under the data dir, else a new one kept there. */
function adminKey(config: Config, dir: string): { key: string; source: string } {
  if (config.MEMSTREAM_API_KEY) return { key: config.MEMSTREAM_API_KEY, source: 'MEMSTREAM_API_KEY' };
  const file = path.join(dir, 'api-key');
  if (existsSync(file)) return { key: readFileSync(file, 'utf8').trim(), source: file };
  const key = 'ms_admin_' + randomBytes(24).toString('base64url');
  writeFileSync(file, key + '\n', { mode: 0o600 });
  return { key, source: `${file} (generated)` };
}

/** Services log JSON; the launcher shows it pretty on a terminal and as JSON lines otherwise. */
function logSink(): (service: ServiceName, line: string) => void {
  if (!process.stdout.isTTY) return (_s, line) => process.stdout.write(line + '\n');
  const pretty = prettyStream({ colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname,service,name', messageFormat: '{service} | {msg}', destination: 1 });
  return (_s, line) => {
    if (line.startsWith('{')) pretty.write(line + '\n');
    else process.stdout.write(line + '\n');
  };
}

async function up(config: Config): Promise<void> {
  const dir = dataDir(config);
  mkdirSync(dir, { recursive: true });
  const log = createLogger('memstream', { pretty: process.stdout.isTTY });
  const { key, source } = adminKey(config, dir);
  // The services compiled once per change of the sources (about 2 s; ./bundle.ts says why), so
  // each starts, and restarts after a crash, on plain node. MEMSTREAM_TSX=1: through tsx instead.
  let bundleDir: string | undefined;
  if (process.env.MEMSTREAM_TSX !== '1') {
    const t0 = Date.now();
    bundleDir = await serviceBundles(REPO_ROOT, SERVICES);
    log.info({ ms: Date.now() - t0, dir: bundleDir }, 'services compiled');
  }
  let nats: NatsServerHandle | null = null;
  let natsUrl = config.NATS_URL;
  if (!natsUrl) {
    // The port is chosen once and kept in the data dir, so a restarted server is where the
    // services' reconnects look for it; the kernel stops it if this launcher is killed.
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats'), ...LAUNCHER_NATS, portFile: path.join(dir, 'nats.port') });
    natsUrl = nats.url;
    // `replay redrive` and `replay embed` find the running server here (the URL carries its credentials).
    writeFileSync(path.join(dir, 'nats.url'), natsUrl + '\n', { mode: 0o600 });
    log.info({ url: nats.address, version: nats.version, fsync: nats.syncAlways ? 'always' : 'every 2 min (nats-server < 2.10 has no sync_interval)', gomaxprocs: nats.gomaxprocs ?? "Go's default" }, 'nats-server started');
  }
  {
    // Before any service starts: a store made under the earlier default model keeps it (./earlier-model.ts).
    const bus = await connectBus({ url: natsUrl, name: 'memstream-up', log });
    try {
      const kept = await keepEarlierDefaultModel(bus, dir, process.env);
      if (kept) {
        log.warn(
          { model: kept.model },
          `this store's documents were embedded with ${kept.model}, the default model before the static one, and EMBEDDER is not set: it stays the active model. ` +
            'Switch with ./memstream replay embed --model static (docs/embedders.md)',
        );
      }
    } finally {
      await bus.close();
    }
  }
  const env: Record<string, string> = {
    NATS_URL: natsUrl,
    MEMSTREAM_DATA_DIR: dir,
    MEMSTREAM_API_KEY: key,
    MEMSTREAM_PORT: String(config.MEMSTREAM_PORT),
    MEMSTREAM_HOST: config.MEMSTREAM_HOST,
    LOG_LEVEL: config.LOG_LEVEL,
    MEMSTREAM_LOG_PRETTY: '0',
    // Each service stops when this launcher's pid is no longer its parent (packages/kit lifecycle.ts).
    MEMSTREAM_EXIT_WITH_PARENT: String(process.pid),
  };
  const onLog = logSink();
  // The pipeline's workers run at a lower CPU priority than the gateway, with a larger young generation
  // (MEMSTREAM_WORKER_NICE, MEMSTREAM_WORKER_SEMI_SPACE_MB; stack.ts, launcherTuning), restarted ones too.
  const tuning = { workerNice: config.MEMSTREAM_WORKER_NICE, workerSemiSpaceMb: config.MEMSTREAM_WORKER_SEMI_SPACE_MB };
  // By process: a service alone, or a worker host (MEMSTREAM_LAYOUT; stack.ts, layoutProcesses).
  const procs = new Map<string, ServiceProcess>();
  let stopping = false;
  // Every line names the process; a host's also what it runs (`stages`: extractor, chunker, embedder), a service alone itself.
  const named = (p: ServiceProcess) => (isHost(p) ? { process: p.name, services: p.services } : { process: p.name, service: p.name });

  // A crashed process is started again (at most 5 times a minute), so one bad moment does not stop the system;
  // a host is started again whole, every service it ran.
  const restarts = new Map<string, number[]>();
  const supervise = (p: ServiceProcess) => {
    p.child.once('exit', (code, signal) => {
      if (stopping) return;
      const now = Date.now();
      const recent = (restarts.get(p.name) ?? []).filter((t) => now - t < 60_000);
      restarts.set(p.name, [...recent, now]);
      if (recent.length >= 5) {
        log.error(named(p), 'service keeps crashing: giving up on it');
        return;
      }
      log.warn({ ...named(p), code, signal }, 'service exited: restarting');
      spawnProcess({ name: p.name, services: p.services }, { env, onLog, detached: true, bundleDir, ...launcherTuning(p.name, tuning) })
        .then((np) => {
          log.info({ ...named(np), ms: Date.now() - now, ...(np.opsUrl ? { opsUrl: np.opsUrl } : {}) }, 'service restarted (its ops port may have moved)');
          procs.set(np.name, np);
          supervise(np);
        })
        .catch((err) => log.error({ ...named(p), err: errorMessage(err) }, 'restart failed'));
    });
  };

  // The broker is supervised like the services: started again on the same port and store when
  // it exits; the services reconnect by themselves (connectBus retries for ever).
  const brokerRestarts: number[] = [];
  const superviseBroker = (server: NatsServerHandle) => {
    server.onExit((code, signal) => {
      if (stopping) return;
      const now = Date.now();
      const recent = brokerRestarts.filter((t) => now - t < 60_000);
      brokerRestarts.splice(0, brokerRestarts.length, ...recent, now);
      if (recent.length >= 5) {
        log.fatal({ code, signal }, 'nats-server keeps exiting (5 times in a minute): stopping memstream');
        void stopAll().then(() => process.exit(1));
        return;
      }
      log.warn({ code, signal, port: server.port }, 'nats-server exited: restarting it on the same port and store');
      const t0 = performance.now();
      const again = async (attempt: number): Promise<void> => {
        try {
          await server.restart();
          writeFileSync(path.join(dir, 'nats.url'), server.url + '\n', { mode: 0o600 });
          log.info({ url: server.address, ms: Math.round(performance.now() - t0), attempt }, 'nats-server restarted');
          if (server.url !== env.NATS_URL) {
            // Its port was taken meanwhile: the services reconnect to the old address for ever, so
            // they are restarted (by their supervision) with the new one.
            log.warn({ url: server.address }, 'nats-server came back on another port: restarting the services');
            env.NATS_URL = server.url;
            for (const p of procs.values()) p.child.kill('SIGTERM');
          }
        } catch (err) {
          if (stopping) return;
          if (attempt >= 5) {
            log.fatal({ err: errorMessage(err) }, 'nats-server could not be started again: stopping memstream');
            await stopAll();
            process.exit(1);
          }
          log.warn({ err: errorMessage(err), attempt }, 'nats-server restart failed: trying again in 1 s');
          await new Promise((r) => setTimeout(r, 1_000));
          return again(attempt + 1);
        }
      };
      void again(1);
    });
  };
  if (nats) superviseBroker(nats);

  const stopAll = async () => {
    stopping = true;
    // Gateway first (stop accepting), then the stages, then the projection, then the broker.
    for (const p of processStopOrder([...procs.values()])) await stopProcess(p.child);
    await nats?.stop();
  };
  let signalled = false;
  const onSignal = (sig: string) => {
    if (signalled) process.exit(1);
    signalled = true;
    log.info({ signal: sig }, 'stopping memstream');
    void stopAll().then(() => process.exit(0));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  try {
    for (const p of await spawnLauncherLayout({ env, onLog, detached: true, bundleDir, ...tuning, layout: config.MEMSTREAM_LAYOUT })) procs.set(p.name, p);
    const gw = procs.get('gateway')!;
    for (const p of procs.values()) supervise(p);
    const url = gw.url ?? `http://${config.MEMSTREAM_HOST}:${config.MEMSTREAM_PORT}`;
    process.stdout.write(
      [
        '',
        `memstream is up.`,
        `  base URL : ${url}`,
        `  API key  : ${key}   (from ${source})`,
        `  data dir : ${dir}`,
        `  metrics  : ${url}/metrics (gateway); workers' /metrics, /healthz, /readyz:`,
        ...[...procs.values()].filter((p) => p.opsUrl).map((p) => `             ${p.name.padEnd(11)}${p.opsUrl}${isHost(p) ? `  (${p.services.join(', ')})` : ''}`),
        `  try      : curl -s ${url}/v3/documents -H "Authorization: Bearer ${key}" -H 'content-type: application/json' -d '{"content":"hello memstream"}'`,
        `  stop     : Ctrl-C`,
        '',
        '',
      ].join('\n'),
    );
  } catch (err) {
    log.error({ err: errorMessage(err) }, 'start failed');
    await stopAll();
    process.exit(1);
  }
}

async function withBus<T>(config: Config, fn: (bus: Awaited<ReturnType<typeof connectBus>>) => Promise<T>, opts: { running?: boolean } = {}): Promise<T> {
  const dir = dataDir(config);
  const log = pino({ level: 'warn' });
  let nats: NatsServerHandle | null = null;
  // The server of a running `./memstream up` on this data dir, rather than a second one on its store.
  let url = config.NATS_URL ?? runningNatsUrl(dir) ?? undefined;
  if (!url && opts.running) throw new Error(`memstream is not running on ${dir} (and NATS_URL is not set): start it with ./memstream up, the services do this work`);
  if (!url) {
    // Nothing running: open the embedded store with a private server for the duration.
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    url = nats.url;
  }
  const bus = await connectBus({ url, name: 'memstream-cli', log });
  try {
    await ensureTopology(bus.jsm, { ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS });
    return await fn(bus);
  } finally {
    await bus.close();
    await nats?.stop();
  }
}

async function replay(config: Config, args: string[]): Promise<number> {
  const what = args[0];
  if (what === undefined || what === '--help' || what === '-h') {
    process.stdout.write(REPLAY_HELP + '\n');
    return what === undefined ? 2 : 0;
  }
  const commands = { index: replayIndex, redrive: replayRedrive, embed: replayEmbed, memories: replayMemories } as const;
  if (what === 'index' || what === 'redrive' || what === 'embed' || what === 'memories') {
    return commands[what](config, dataDir(config), args.slice(1), (fn, opts) => withBus(config, fn, opts));
  }
  if (what !== 'projection') {
    process.stderr.write(`memstream replay: unknown target ${what}: projection, index, memories, redrive or embed (./memstream replay --help)\n`);
    return 2;
  }
  const swap = commandArgs('replay projection', REPLAY_USAGE.projection, { args: args.slice(1), options: { swap: { type: 'boolean' } } }).values.swap === true;
  const dir = dataDir(config);
  mkdirSync(dir, { recursive: true });
  const livePath = path.join(dir, 'views.sqlite');
  const nextPath = path.join(dir, 'views.rebuild.sqlite');
  return withBus(config, async (bus) => {
    let target: DocumentViews;
    if (config.MONGODB_URL) {
      target = await MongoDocumentViews.connect(config.MONGODB_URL, 'memstream', 'documents_rebuild');
      for await (const v of target.all()) await target.delete(v.id);
    } else {
      for (const suffix of ['', '-wal', '-shm']) rmSync(nextPath + suffix, { force: true });
      target = SqliteDocumentViews.open(nextPath);
    }
    const t0 = performance.now();
    const { events, documents } = await rebuildViews(bus, target, progressBar('replay projection'));
    const secs = (performance.now() - t0) / 1000;
    process.stdout.write(`rebuilt ${documents} documents from ${events} events in ${secs.toFixed(1)} s\n`);
    const live = await openDocumentViews({ sqlitePath: livePath, ...(config.MONGODB_URL ? { mongodbUrl: config.MONGODB_URL } : {}) });
    const cmp = await compareViews(live, target);
    await live.close();
    await target.close();
    process.stdout.write(
      `compared with the live view: ${cmp.same} equal, ${cmp.different.length} different, ${cmp.onlyInA.length} only live, ${cmp.onlyInB.length} only rebuilt\n`,
    );
    if (swap) {
      if (config.MONGODB_URL) {
        process.stdout.write('--swap with MongoDB: rename collection documents_rebuild to documents in the mongo shell (renameCollection with dropTarget).\n');
      } else {
        for (const suffix of ['-wal', '-shm']) rmSync(livePath + suffix, { force: true });
        renameSync(nextPath, livePath);
        process.stdout.write(`the live view is now the rebuilt one (${livePath})\n`);
      }
    } else {
      process.stdout.write(`rebuilt view kept at ${config.MONGODB_URL ? 'collection documents_rebuild' : nextPath}; --swap makes it the live one\n`);
    }
    return 0;
  });
}

const MCP_USAGE = `usage: ./memstream mcp [--url URL] [--key KEY]

Bridges an MCP client on stdin/stdout to a running memstream's /mcp (docs/mcp.md). --url and
--key default to MEMSTREAM_URL / MEMSTREAM_API_KEY, else the memstream up on this data dir.`;

/** `./memstream mcp`: stdout carries MCP messages only, so every word for a human goes to stderr. */
async function mcpCommand(config: Config, argv: string[]): Promise<number> {
  const { values } = commandArgs('mcp', MCP_USAGE, { args: argv, options: { url: { type: 'string' }, key: { type: 'string' } } });
  const target = apiTarget(config, dataDir(config), values);
  const { runStdioBridge } = await import('@memstream/mcp');
  await runStdioBridge({ ...target, log: (line) => process.stderr.write(`memstream mcp: ${line}\n`) });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const config = loadConfig();
  switch (cmd) {
    case 'up':
      commandArgs('up', UP_USAGE, { args: rest, options: {} });
      await up(config);
      return -1; // keeps running until a signal
    case 'replay':
      return replay(config, rest);
    case 'import':
      return importCommand(config, dataDir(config), rest);
    case 'mcp':
      return mcpCommand(config, rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE + '\n');
      return 0;
    default:
      process.stderr.write(`memstream: unknown command ${cmd}: up, test, replay or bench (./memstream --help)\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    process.stderr.write(`memstream: ${errorMessage(err)}\n`);
    process.exit(1);
  },
);
