import { describeMemoryExtractorContract } from './contract.js';
import { OfflineExtractor } from './offline.js';

describeMemoryExtractorContract('offline rules', async () => ({ extractor: new OfflineExtractor(), cleanup: async () => {} }));
