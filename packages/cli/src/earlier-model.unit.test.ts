import { describe, expect, it } from 'vitest';
import { earlierDefault } from './earlier-model.js';

const hashed = { model: 'hashed-ngram-v1-384', dim: 384 };

describe('a store made under the earlier default (hashed) model, started again without EMBEDDER', () => {
  it('keeps the hashed model its documents hold, as the active model with its spec', () => {
    expect(earlierDefault({ embedderSet: false, recorded: false, indexed: hashed })).toEqual({
      model: 'hashed-ngram-v1-384',
      dim: 384,
      index: 'default',
      settings: { EMBEDDER: 'hashed', EMBEDDING_DIM: '384' },
      spec: 'hashed:384',
    });
    expect(earlierDefault({ embedderSet: false, recorded: false, indexed: { model: 'hashed-ngram-v1-256', dim: 256 } })?.spec).toBe('hashed:256');
  });

  it('records nothing when EMBEDDER is set, a model is recorded already, the store is empty or holds another model', () => {
    expect(earlierDefault({ embedderSet: true, recorded: false, indexed: hashed })).toBeNull();
    expect(earlierDefault({ embedderSet: false, recorded: true, indexed: hashed })).toBeNull();
    expect(earlierDefault({ embedderSet: false, recorded: false, indexed: null })).toBeNull();
    expect(earlierDefault({ embedderSet: false, recorded: false, indexed: { model: 'static-glove100-sif-1.1.0-b3', dim: 100 } })).toBeNull();
  });
});
