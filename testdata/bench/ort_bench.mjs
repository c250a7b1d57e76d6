// ONNX Runtime side of scripts/bench.sh: times one ONNX model's forward pass
// in onnxruntime-node (CPU) on a random float32 input, fed to every input.
//
// Usage:
//
//   node testdata/bench/ort_bench.mjs MODEL.onnx --shape B,T,D [--threads 2] [--warmup 2] [--time 2] [--ort DIR]
//
// The session runs with intraOpNumThreads = --threads, one inter-op thread,
// sequential execution and all graph optimizations (ORT's defaults apart
// from the thread counts). It warms up, then runs until --time seconds have
// passed and at least 3 runs were timed, and prints one line of key=value
// pairs, like torch_bench.py: median, min, p10 and p90 latency in ms, the run
// count, and peak_rss_mib, the process's peak RSS (VmHWM) reset just before
// the warm-up; rss_before_mib is the RSS at that reset (node, ORT and the
// loaded model). --ort is the directory whose node_modules holds
// onnxruntime-node (default: $ORT_HOME, else ~/.cache/attnrun/ort, where
// scripts/install-reference-tools.sh puts it).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

function usage(msg) {
  if (msg) console.error(`ort_bench: ${msg}`);
  console.error("usage: node ort_bench.mjs MODEL.onnx --shape B,T,D [--threads N] [--warmup N] [--time SECONDS] [--ort DIR]");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { model: "", shape: null, threads: 2, warmup: 2, time: 2, ort: process.env.ORT_HOME || path.join(os.homedir(), ".cache/attnrun/ort") };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    const number = () => {
      const v = Number(value());
      if (!Number.isFinite(v) || v < 0) usage(`${a} needs a non-negative number`);
      return v;
    };
    if (a === "--shape") {
      opts.shape = value().split(",").map(Number);
      if (opts.shape.length !== 3 || !opts.shape.every((n) => Number.isInteger(n) && n > 0)) usage("--shape wants B,T,D, three positive integers");
    } else if (a === "--threads") opts.threads = number();
    else if (a === "--warmup") opts.warmup = number();
    else if (a === "--time") opts.time = number();
    else if (a === "--ort") opts.ort = value();
    else if (a.startsWith("--")) usage(`unknown flag ${a}`);
    else if (!opts.model) opts.model = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!opts.model) usage("no model given");
  if (!opts.shape) usage("--shape is required");
  return opts;
}

// statusMiB reads a VmXXX line of /proc/self/status, in MiB.
function statusMiB(key) {
  const line = fs.readFileSync("/proc/self/status", "latin1").split("\n").find((l) => l.startsWith(key + ":"));
  if (!line) throw new Error(`no ${key} in /proc/self/status`);
  return Number(line.split(/\s+/)[1]) / 1024;
}

// resetPeakRSS sets VmHWM to the current RSS (proc(5), clear_refs) and
// returns that RSS in MiB.
function resetPeakRSS() {
  try {
    fs.writeFileSync("/proc/self/clear_refs", "5");
  } catch {
    // Not permitted: VmHWM then covers the whole process.
  }
  return statusMiB("VmRSS");
}

// randomNormal fills n floats from a seeded generator (xorshift32 and
// Box-Muller), so every run feeds the same input.
function randomNormal(n, seed) {
  let s = seed >>> 0 || 1;
  const uniform = () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return (s + 1) / 4294967297;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(uniform())), phi = 2 * Math.PI * uniform();
    out[i] = r * Math.cos(phi);
    if (i + 1 < n) out[i + 1] = r * Math.sin(phi);
  }
  return out;
}

// quantile interpolates linearly between the closest ranks (numpy's
// default), as attnrun bench and torch_bench.py do.
function quantile(sorted, q) {
  const pos = q * (sorted.length - 1), i = Math.floor(pos);
  return i + 1 >= sorted.length ? sorted[sorted.length - 1] : sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

const opts = parseArgs(process.argv.slice(2));
const ort = createRequire(path.join(path.resolve(opts.ort), "noop.js"))("onnxruntime-node");
try {
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  const [b, t, d] = opts.shape;
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    feeds[name] = new ort.Tensor("float32", randomNormal(b * t * d, 12345 + i), opts.shape);
  });
  const before = resetPeakRSS();
  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  const times = [];
  const start = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - start) / 1e9;
  while (times.length < 3 || elapsed() < opts.time) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((x, y) => x - y);
  const f = (v) => v.toFixed(4);
  console.log(`threads=${opts.threads} median_ms=${f(quantile(times, 0.5))} min_ms=${f(times[0])} p10_ms=${f(quantile(times, 0.1))} p90_ms=${f(quantile(times, 0.9))} ` +
    `runs=${times.length} peak_rss_mib=${f(statusMiB("VmHWM"))} rss_before_mib=${f(before)}`);
} catch (err) {
  console.error(`ort_bench: ${opts.model}: ${err.message ?? err}`);
  process.exit(1);
}
