import type { MemoryCandidate, MemoryRecord } from '@memstream/contracts';

/** What an extractor reads (memory-layer.md §4): the new text, its date, the tag's context and what the tag already knows. */
export interface ExtractionInput {
  text: string;
  format: 'plain' | 'markdown' | 'conversation';
  /** ISO: relative dates in the text ("last month") resolve against it. */
  documentDate: string;
  entityContext: string | null;
  /** The tag's live latest memories related to the text, and its static ones (filterByMetadata applied). */
  existing: MemoryRecord[];
  /** The key's filterPrompt when shouldLLMFilter is on (/v3/settings): which content is worth remembering. A model follows it; the offline rules cannot. */
  filterPrompt?: string;
}

export interface ExtractionResult {
  candidates: MemoryCandidate[];
  /** Tokens a model used; 0 offline. */
  tokens: number;
}

/** Turns content into candidate memories. Its output is recorded in the log, so it need not be deterministic. */
export interface MemoryExtractor {
  /** Labels every memory it makes (`offline-rules@1`, `llm:<model>`). */
  readonly name: string;
  extract(input: ExtractionInput): Promise<ExtractionResult>;
}
