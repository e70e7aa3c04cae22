/**
 * A conversational retrieval set, generated: no real long-conversation set can be reached
 * offline. Each conversation is several dated sessions between a user and an assistant; most
 * turns are small talk drawn from a pool, and a few user turns state a personal fact ("we named
 * the beagle Biscuit"). Each fact gives a question worded differently ("What is the name of my
 * dog?") whose evidence is that one turn. Near-misses (the same kind of fact about someone
 * else, in other words) make the questions harder than word lookup.
 *
 * Machine-checked: a fact's answer occurs in its evidence turn and in no other turn of the
 * conversation, and a question never contains its answer; a conversation that fails this is
 * generated again with the next seed.
 */
import { rng, shuffle } from './manpages.js';

export interface Turn {
  speaker: 'user' | 'assistant';
  text: string;
}

export interface Session {
  /** ISO date of the session. */
  date: string;
  turns: Turn[];
}

export interface Conversation {
  id: string;
  sessions: Session[];
  questions: { q: string; answer: string; /** session and turn index of the evidence */ evidence: { session: number; turn: number } }[];
}

interface FactKind {
  /** The fact, said by the user; {x} is the answer. */
  says: string[];
  /** The question. */
  asks: string[];
  values: string[];
  /** The same kind of statement about someone else, with another value (a distractor). */
  nearMiss: string[];
}

const FACTS: FactKind[] = [
  {
    says: ['We finally adopted a puppy last weekend, a beagle we named {x}.', 'Our new beagle {x} chewed through my running shoes again.'],
    asks: ['What is the name of my dog?', 'What did I call the puppy we got?'],
    values: ['Biscuit', 'Pepper', 'Waffles', 'Juniper', 'Moose', 'Tofu'],
    nearMiss: ["My neighbour's cat is called {x} and it sleeps on our porch."],
  },
  {
    says: ['My sister {x} is flying in from Toronto for the holidays.', "I'm helping my sister {x} move into her new flat on Saturday."],
    asks: ["What is my sister's name?", 'Who is the sibling visiting me?'],
    values: ['Priya', 'Ingrid', 'Marisol', 'Dagny', 'Yuki', 'Fenella'],
    nearMiss: ['A colleague named {x} brought homemade dumplings to the office.'],
  },
  {
    says: ["I've signed up for the {x} marathon in the autumn, so training starts now.", 'Training for the {x} marathon means long runs every Sunday.'],
    asks: ['Which race am I preparing for?', 'What endurance event did I register for?'],
    values: ['Berlin', 'Chicago', 'Lisbon', 'Valencia', 'Osaka', 'Dublin'],
    nearMiss: ['My cousin once cycled across {x} for charity.'],
  },
  {
    says: ['I started a new job as a {x} at the hospital downtown.', 'Work has been intense since I became a {x} last month.'],
    asks: ['What is my current profession?', 'What position did I recently take on?'],
    values: ['radiographer', 'pharmacist', 'midwife', 'physiotherapist', 'paramedic', 'dietitian'],
    nearMiss: ['My uncle retired after thirty years as a {x}.'],
  },
  {
    says: ["I'm allergic to {x}, so I always check the labels when I shop.", 'The doctor confirmed my {x} allergy, no more of that for me.'],
    asks: ['What food must I avoid for health reasons?', 'What can I not eat?'],
    values: ['sesame', 'shellfish', 'hazelnuts', 'kiwi', 'mustard', 'celery'],
    nearMiss: ['The bakery near the station sells bread with {x} on top.'],
  },
  {
    says: ['I bought a secondhand {x} and I drive it to the coast on weekends.', 'My {x} needs new tyres before the road trip.'],
    asks: ['What car do I own?', 'Which vehicle do I take on weekend trips?'],
    values: ['Volvo estate', 'Subaru Outback', 'Mini Cooper', 'Skoda Octavia', 'Toyota Prius', 'Fiat Panda'],
    nearMiss: ['A {x} was blocking the driveway this morning.'],
  },
  {
    says: ["I've been learning to play the {x} in the evenings.", 'My {x} teacher says my scales are getting cleaner.'],
    asks: ['Which instrument am I practising?', 'What musical instrument am I studying?'],
    values: ['cello', 'clarinet', 'banjo', 'harp', 'oboe', 'accordion'],
    nearMiss: ['At the concert the {x} solo was a bit too loud.'],
  },
  {
    says: ['We booked our honeymoon in {x} for next spring.', 'Planning the honeymoon: {x} it is, flights are booked.'],
    asks: ['Where are we going after the wedding?', 'What destination did we choose for the honeymoon?'],
    values: ['Kyoto', 'Patagonia', 'Zanzibar', 'Reykjavik', 'Tasmania', 'Marrakesh'],
    nearMiss: ['The documentary last night was about the wildlife of {x}.'],
  },
  {
    says: ['My daughter turned seven and she wants to be called {x} now, not by her full name.', 'Little {x} lost her first tooth today.'],
    asks: ["What's my daughter's nickname?", 'What does my kid like to be called?'],
    values: ['Bea', 'Lottie', 'Mimi', 'Roo', 'Tilly', 'Nell'],
    nearMiss: ['The new barista is called {x}, she remembers everyone.'],
  },
  {
    says: ['I finally finished my thesis on {x}, the defence is in June.', 'My supervisor liked the chapter on {x}.'],
    asks: ['What is my dissertation about?', 'What topic did I research for my degree?'],
    values: ['coral bleaching', 'medieval trade routes', 'soil microbiomes', 'urban heat islands', 'glacier hydrology', 'bird migration'],
    nearMiss: ['I watched a lecture on {x} but it went over my head.'],
  },
  {
    says: ['Our flat is on {x}, right above the bakery.', 'We moved to {x} so the commute is shorter.'],
    asks: ['What street do I live on?', 'Where is my home located?'],
    values: ['Alder Lane', 'Quarry Road', 'Rosemary Street', 'Kestrel Avenue', 'Mill Walk', 'Harbour Row'],
    nearMiss: ['There was a street party on {x} but we did not go.'],
  },
  {
    says: ['My favourite board game is {x}, we play it every Friday.', 'I won {x} last night for the first time in months.'],
    asks: ['Which tabletop game do I enjoy most?', 'What game do we play on Fridays?'],
    values: ['Carcassonne', 'Azul', 'Wingspan', 'Catan', 'Dominion', 'Patchwork'],
    nearMiss: ['The shop had {x} on sale but I already own too many games.'],
  },
];

const SMALL_TALK: string[] = [
  'The weather has been strange this week, sunny in the morning and pouring by lunch.',
  'I tried a new recipe for lentil soup and it came out better than expected.',
  'Work was busy today, three meetings back to back and not much got done.',
  "I've been sleeping badly, maybe too much coffee in the afternoon.",
  'We watched a film about a heist on Saturday, the ending was silly.',
  'The train was late again, twenty minutes standing on the platform.',
  "I'm thinking of repainting the kitchen, maybe a pale green.",
  'My phone screen cracked when it fell off the table.',
  'I went for a long walk along the river and saw herons.',
  'The garden is full of weeds after all the rain.',
  'I started reading a mystery novel, it is slow but atmospheric.',
  "We're trying to eat less meat, so lots of beans this week.",
  'The neighbours are renovating and the drilling starts at eight.',
  'I need to renew my passport before the summer.',
  'Our internet went down for the whole evening yesterday.',
  'I signed up for a pottery class but I missed the first session.',
  'The supermarket changed its layout and now I can never find anything.',
  'I made a spreadsheet for the household budget, it is a bit depressing.',
  'A friend recommended a podcast about history, I listened on the bus.',
  "My back hurts from sitting all day, I should get a better chair.",
];

const ASSISTANT: string[] = [
  'That sounds like a lot. How are you feeling about it?',
  'Thanks for telling me. Would you like some suggestions?',
  'Good to hear. Anything you want to plan for next week?',
  'That is understandable. Small steps help.',
  'Interesting! What did you enjoy most about it?',
  'I can help you make a list if that would be useful.',
  'Noted. Let me know how it goes.',
  'It sounds like a busy stretch. Remember to rest.',
];

function fill(t: string, x: string): string {
  return t.replaceAll('{x}', x);
}

function generateOne(id: string, seed: number, opts: { sessions: number; turnsPerSession: number; facts: number }): Conversation | null {
  const rand = rng(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const kinds = shuffle(FACTS, rand).slice(0, opts.facts);
  const start = Date.UTC(2023, Math.floor(rand() * 12), 1 + Math.floor(rand() * 27));
  const sessions: Session[] = [];
  for (let s = 0; s < opts.sessions; s++) {
    const date = new Date(start + s * (3 + Math.floor(rand() * 20)) * 86_400_000).toISOString().slice(0, 10);
    const turns: Turn[] = [];
    for (let t = 0; t < opts.turnsPerSession; t++) turns.push(t % 2 === 0 ? { speaker: 'user', text: pick(SMALL_TALK) } : { speaker: 'assistant', text: pick(ASSISTANT) });
    sessions.push({ date, turns });
  }
  const userSlots = (s: number) => sessions[s]!.turns.map((t, i) => (t.speaker === 'user' ? i : -1)).filter((i) => i >= 0);
  const used = new Set<string>();
  const questions: Conversation['questions'] = [];
  for (const kind of kinds) {
    const [value, other] = shuffle(kind.values, rand);
    // The fact and its near-miss go into different random user turns.
    for (const [text, isFact] of [[fill(pick(kind.says), value!), true], [fill(pick(kind.nearMiss), other!), false]] as const) {
      let session = 0;
      let turn = 0;
      for (let tries = 0; tries < 50; tries++) {
        session = Math.floor(rand() * sessions.length);
        turn = pick(userSlots(session));
        if (!used.has(`${session}:${turn}`)) break;
      }
      used.add(`${session}:${turn}`);
      sessions[session]!.turns[turn] = { speaker: 'user', text };
      if (isFact) questions.push({ q: pick(kind.asks), answer: value!, evidence: { session, turn } });
    }
  }
  // The machine check: each answer in its evidence turn only, and never in its question.
  for (const q of questions) {
    if (q.q.toLowerCase().includes(q.answer.toLowerCase())) return null;
    let where = 0;
    sessions.forEach((s, si) => s.turns.forEach((t, ti) => {
      if (t.text.toLowerCase().includes(q.answer.toLowerCase())) where += si === q.evidence.session && ti === q.evidence.turn ? 1 : 100;
    }));
    if (where !== 1) return null;
  }
  return { id, sessions, questions };
}

/** `count` conversations, repeatable by seed. */
export function generateConversations(opts: { count: number; seed: number; sessions?: number; turnsPerSession?: number; facts?: number }): Conversation[] {
  const out: Conversation[] = [];
  let seed = opts.seed * 1_000_003;
  while (out.length < opts.count) {
    const c = generateOne(`conv-${opts.seed}-${out.length}`, seed++, { sessions: opts.sessions ?? 10, turnsPerSession: opts.turnsPerSession ?? 20, facts: opts.facts ?? 10 });
    if (c) out.push(c);
  }
  return out;
}

/**
 * The conversation as a user would send it: a "role: text" transcript, each session opened by
 * a line with its date (the chunker's conversation units carry it into every turn's chunk).
 */
export function transcriptOf(c: Conversation): string {
  return c.sessions.map((s, i) => [`Session ${i + 1} · ${s.date}`, ...s.turns.map((t) => `${t.speaker}: ${t.text}`)].join('\n\n')).join('\n\n');
}
