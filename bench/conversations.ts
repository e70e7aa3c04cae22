/**
 * Conversational retrieval benchmark: generated multi-session conversations through a private
 * memstream, then questions about what the user said, answered from the context each retrieval
 * returns within a token budget.
 *
 *   ./memstream bench conversations [--people 6] [--sessions 6] [--seed 7] [--json] [--verbose]
 *
 * The generator is seeded and machine-checked: each person (one container tag) has attributes
 * that change across sessions (home, employer, role, diet) and episodes (a trip, a hobby), said
 * in first-person user turns among chit-chat and assistant replies. Every question has one
 * answer string: the attribute's value as of the last session, or the episode's detail. A
 * question is recalled at a budget when the answer appears in the first N tokens (≈ 4
 * characters a token) of the context a mode returns.
 *
 * Modes: /v4/search with searchMode memories, hybrid and documents (limit 50, threshold 0, the
 * person's tag), and BM25 over the raw turns of that person (k1 1.2, b 0.75, every turn a
 * document), computed here in the same run. Figures, not assertions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { rng } from '../test/retrieval/manpages.js';
import { SERVICES, commandArgs, spawnService, startNatsServer, stopProcess, type ServiceProcess } from '@memstream/cli';

const USAGE = `usage: ./memstream bench conversations [--people 6] [--sessions 6] [--seed 7] [--json] [--verbose]

Generated multi-session conversations through a private memstream: evidence recall within 500, 1,000 and 2,000 tokens of memories, hybrid and documents search against BM25 over the raw turns. --verbose lists the questions memories search missed.`;
const { values } = commandArgs('bench conversations', USAGE, {
  options: {
    people: { type: 'string', default: '6' },
    sessions: { type: 'string', default: '6' },
    seed: { type: 'string', default: '7' },
    json: { type: 'boolean', default: false },
    /** Print each question a memory mode missed at 500 tokens, with the top of what it returned. */
    verbose: { type: 'boolean', default: false },
  },
});
const PEOPLE = Number(values.people);
const SESSIONS = Number(values.sessions);
const BUDGETS = [500, 1000, 2000];


const NAMES = ['Priya Raman', 'Tomás Silva', 'Ana Kowalski', 'Jonas Berg', 'Mei Chen', 'Omar Haddad', 'Lena Fischer', 'Diego Ruiz', 'Sara Nilsson', 'Kofi Mensah'];
const CITIES = ['Lisbon', 'Berlin', 'Porto', 'Madrid', 'Vienna', 'Oslo', 'Dublin', 'Prague', 'Krakow', 'Lyon'];
const EMPLOYERS = ['Siemens', 'Bosch', 'Zeiss', 'Airbus', 'Philips', 'Ericsson', 'Nokia', 'Spotify'];
const ROLES = ['nurse', 'engineer', 'teacher', 'designer', 'pharmacist', 'accountant', 'translator'];
const DIETS = ['vegetarian', 'vegan', 'pescatarian'];
const HOBBIES = ['pottery', 'bouldering', 'chess', 'salsa dancing', 'birdwatching', 'sourdough baking', 'sailing'];
const TRIPS = ['the Azores', 'Iceland', 'Morocco', 'the Dolomites', 'Kyoto', 'Patagonia', 'Sicily'];
const CHAT = [
  'How was your weekend? Mine was quiet, mostly reading and a long walk in the park.',
  'Can you help me plan the week? I have a lot going on with errands and calls.',
  'What is a good way to remember to drink more water during the day?',
  'I watched a documentary about deep sea creatures last night, it was fascinating.',
  'Do you have any tips for sleeping better when the neighbours are noisy?',
  'Could you suggest a few podcasts about history or science for my commute?',
  'The weather has been strange lately, sunny in the morning and stormy by evening.',
  'I need a recipe for a quick dinner with rice, beans and whatever vegetables are left.',
];
const REPLIES = [
  'That sounds lovely. A slow weekend can be the best way to recharge before a busy week.',
  'Sure, let us start with the most urgent tasks and block time for them in your calendar.',
  'Keeping a bottle on your desk and setting small reminders works well for many people.',
  'Deep sea life is remarkable; some creatures make their own light to hunt and to hide.',
  'Earplugs, a fan for white noise and a regular bedtime can make a real difference.',
  'You might enjoy long-form history shows and short daily science episodes for variety.',
  'Changeable weather is common in spring; layers and an umbrella are your friends.',
  'Try a skillet with rice, beans, onions and peppers, finished with lime and herbs.',
];

interface Question {
  person: number;
  q: string;
  answer: string;
  kind: 'current' | 'episode';
}

interface Person {
  name: string;
  tag: string;
  sessions: Array<{ date: string; messages: Array<{ role: 'user' | 'assistant'; content: string }> }>;
  questions: Question[];
}

/** The seeded conversations and their questions. */
function generate(seed: number): Person[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const people: Person[] = [];
  for (let p = 0; p < PEOPLE; p++) {
    const name = NAMES[p % NAMES.length]!;
    const tag = `conv-${p}`;
    let city = pick(CITIES);
    let employer = pick(EMPLOYERS);
    let role = pick(ROLES);
    let diet: string | null = null;
    const hobby = pick(HOBBIES);
    const trip = pick(TRIPS);
    const sessions: Person['sessions'] = [];
    for (let s = 0; s < SESSIONS; s++) {
      const messages: Person['sessions'][number]['messages'] = [];
      const facts: string[] = [];
      if (s === 0) facts.push(`My name is ${name}.`, `I live in ${city} and work as ${/^[aeiou]/.test(role) ? 'an' : 'a'} ${role}.`, `I work at ${employer}.`);
      else {
        const change = Math.floor(r() * 4);
        if (change === 0) {
          city = pick(CITIES.filter((c) => c !== city));
          facts.push(`I moved to ${city} last month.`);
        } else if (change === 1) {
          employer = pick(EMPLOYERS.filter((e) => e !== employer));
          facts.push(`I joined ${employer} this week.`);
        } else if (change === 2) {
          diet = pick(DIETS.filter((d) => d !== diet));
          facts.push(`I am ${diet} now.`);
        } else {
          role = pick(ROLES.filter((x) => x !== role));
          facts.push(`I work as ${/^[aeiou]/.test(role) ? 'an' : 'a'} ${role} these days.`);
        }
      }
      if (s === 1) facts.push(`I have taken up ${hobby} on Tuesday evenings with friends.`);
      if (s === 2) facts.push(`Last spring I travelled to ${trip} with my cousin for ten days.`);
      const turns = 10;
      const factAt = new Set(facts.map(() => Math.floor(r() * turns)));
      let f = 0;
      for (let t = 0; t < turns; t++) {
        const said = factAt.has(t) && f < facts.length ? `${facts[f++]} ${pick(CHAT)}` : pick(CHAT);
        messages.push({ role: 'user', content: said }, { role: 'assistant', content: pick(REPLIES) });
      }
      while (f < facts.length) messages.push({ role: 'user', content: facts[f++]! }, { role: 'assistant', content: pick(REPLIES) });
      sessions.push({ date: new Date(Date.UTC(2026, 0, 1 + s * 14)).toISOString(), messages });
    }
    const questions: Question[] = [
      { person: p, q: `Where does ${name} live?`, answer: city, kind: 'current' },
      { person: p, q: `Which company does ${name} work for?`, answer: employer, kind: 'current' },
      { person: p, q: `What is ${name}'s job?`, answer: role, kind: 'current' },
      { person: p, q: `What hobby did ${name} take up?`, answer: hobby, kind: 'episode' },
      { person: p, q: `Where did ${name} travel last spring?`, answer: trip, kind: 'episode' },
      ...(diet ? [{ person: p, q: `What diet does ${name} follow?`, answer: diet, kind: 'current' as const }] : []),
    ];
    people.push({ name, tag, sessions, questions });
  }
  return people;
}

const tokensOf = (s: string) => Math.ceil(s.length / 4);

/** The first `budget` tokens of a ranked list of texts, joined. */
function within(texts: string[], budget: number): string {
  let out = '';
  for (const t of texts) {
    if (tokensOf(out) >= budget) break;
    out += t + '\n';
  }
  return out.slice(0, budget * 4);
}

/** BM25 over the raw turns of one person. */
function bm25(turns: string[]): (q: string) => string[] {
  const tok = (s: string) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const docs = turns.map(tok);
  const avg = docs.reduce((a, d) => a + d.length, 0) / Math.max(1, docs.length);
  const df = new Map<string, number>();
  for (const d of docs) for (const w of new Set(d)) df.set(w, (df.get(w) ?? 0) + 1);
  return (q) => {
    const terms = [...new Set(tok(q))];
    const scored = docs.map((d, i) => {
      let s = 0;
      for (const w of terms) {
        const n = df.get(w);
        if (!n) continue;
        const tf = d.filter((x) => x === w).length;
        if (!tf) continue;
        const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
        s += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * (d.length / avg)));
      }
      return { i, s };
    });
    return scored.filter((x) => x.s > 0).sort((a, b) => b.s - a.s).map((x) => turns[x.i]!);
  };
}

async function main(): Promise<void> {
  const people = generate(Number(values.seed));
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-conv-'));
  const nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
  const apiKey = 'ms_bench_' + 'x'.repeat(20);
  const env = { NATS_URL: nats.url, MEMSTREAM_DATA_DIR: dir, MEMSTREAM_API_KEY: apiKey, MEMSTREAM_PORT: '0', LOG_LEVEL: 'warn' };
  const procs: ServiceProcess[] = [];
  try {
    for (const s of SERVICES.filter((x) => x !== 'gateway')) procs.push(await spawnService(s, { env, readyTimeoutMs: 180_000 }));
    const gw = await spawnService('gateway', { env, readyTimeoutMs: 180_000 });
    procs.push(gw);
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(gw.url + p, { method, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
      if (res.status !== 200) throw new Error(`${method} ${p} answered ${res.status}: ${await res.text()}`);
      return res.json() as Promise<any>;
    };

    // Ingest: one conversation document per session, in session order per person.
    const ids: string[] = [];
    const t0 = performance.now();
    await Promise.all(
      people.map(async (person) => {
        for (const [s, session] of person.sessions.entries()) {
          const out = await call('POST', '/v4/conversations', { conversationId: `${person.tag}-s${s}`, containerTag: person.tag, messages: session.messages, metadata: { date: session.date } });
          ids.push(out.id);
          // Sessions of one person are memorized in order: wait for this one before the next.
          for (;;) {
            const d = await call('GET', `/v3/documents/${out.id}`);
            if (d.status === 'failed') throw new Error(`session ${person.tag}-s${s} failed`);
            if (d.dreamingStatus === 'done') break;
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      }),
    );
    const ingestSecs = (performance.now() - t0) / 1000;

    const modes = ['memories', 'hybrid', 'documents', 'bm25'] as const;
    const hits: Record<(typeof modes)[number], number[]> = { memories: [0, 0, 0], hybrid: [0, 0, 0], documents: [0, 0, 0], bm25: [0, 0, 0] };
    const byKind: Record<string, { recalled: number; of: number }> = {};
    const questions = people.flatMap((p) => p.questions);
    for (const q of questions) {
      const person = people[q.person]!;
      const turns = person.sessions.flatMap((s) => s.messages.map((m) => `${m.role}: ${m.content}`));
      for (const mode of modes) {
        let texts: string[];
        if (mode === 'bm25') texts = bm25(turns)(q.q);
        else {
          const out = await call('POST', '/v4/search', { q: q.q, containerTag: person.tag, searchMode: mode, limit: 50, threshold: 0 });
          texts = (out.results as Array<{ memory?: string; chunk?: string }>).map((h) => h.memory ?? h.chunk ?? '');
        }
        BUDGETS.forEach((b, i) => {
          const ok = within(texts, b).toLowerCase().includes(q.answer.toLowerCase());
          if (ok) hits[mode][i]!++;
          else if (i === 0 && values.verbose && mode === 'memories') {
            process.stderr.write(`miss ${mode}: ${q.q} → ${q.answer}; got: ${texts.slice(0, 3).join(' | ')}\n`);
            void call('POST', '/v4/memories/list', { containerTags: [person.tag], limit: 200 }).then((l: { memoryEntries: Array<{ memory: string; isLatest: boolean; isForgotten: boolean }> }) =>
              process.stderr.write(`  memories naming it: ${JSON.stringify(l.memoryEntries.filter((e) => e.memory.includes(q.answer)).map((e) => [e.memory, e.isLatest, e.isForgotten]))}\n`),
            );
          }
          if (i === 0) {
            const k = `${mode}/${q.kind}`;
            const tally = (byKind[k] ??= { recalled: 0, of: 0 });
            tally.of++;
            if (ok) tally.recalled++;
          }
        });
      }
    }
    const recall = Object.fromEntries(modes.map((m) => [m, Object.fromEntries(BUDGETS.map((b, i) => [b, +(hits[m][i]! / questions.length).toFixed(3)]))]));
    const result = { people: PEOPLE, sessions: SESSIONS, questions: questions.length, ingestSecs: +ingestSecs.toFixed(1), evidenceRecall: recall, at500ByKind: byKind };
    if (values.json) process.stdout.write(JSON.stringify(result) + '\n');
    else {
      process.stdout.write(
        [
          `memstream conversational retrieval bench — ${PEOPLE} people × ${SESSIONS} sessions, ${questions.length} questions (seed ${values.seed}), ingest ${result.ingestSecs} s`,
          `  evidence recall within     ${BUDGETS.map((b) => `${b} tok`.padStart(9)).join('')}`,
          ...modes.map((m) => `  ${m.padEnd(25)}${BUDGETS.map((b) => String(recall[m]![b]).padStart(9)).join('')}`),
          `  at 500 tokens, by question kind: ${Object.entries(byKind)
            .map(([k, v]) => `${k} ${v.recalled}/${v.of}`)
            .join(', ')}`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await Promise.all(procs.map((p) => stopProcess(p.child)));
    await nats.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
