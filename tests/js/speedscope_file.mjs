// Reads a speedscope file as a consumer would, for the tests
// (tests/cc/support/speedscope_file.h):
//   node speedscope_file.mjs FILE SAMPLE_PERIOD_NS
// checks it against speedscope's published schema (ajv, draft-07 as the schema
// declares) and what speedscope's importer assumes beyond it, then turns it
// back into PyPerf's collapsed stacks. Prints, one record a line:
//   speedscope_file 1             header (the reader's output version)
//   schema<TAB>message            a schema violation
//   format<TAB>message            a violation of what speedscope's importer needs
//   profiles<TAB>N
//   profile<TAB>name              each profile's name, in the file's order
//   stack<TAB>count<TAB>stack     "<profile name>;frame;..." -> weight / period
// Messages and stacks never hold a line break: "\n" and "\r" are written as
// those two characters (a stack holding one is also a format error, as PyPerf
// never spells one); U+2028 and U+2029 stay as they are.
// Exit status 0 when the file could be read (whatever its validity), 2 when it
// could not.
//
//   node speedscope_file.mjs --app FILE
// loads FILE in speedscope itself (the npm package's release build, in
// Debian's chromium driven by playwright-core), as `speedscope FILE` does:
// through index.html#localProfilePath=<a script calling
// speedscope.loadFileFromBase64>. Prints:
//   speedscope_app 1
//   title<TAB>document.title once imported ("<the file's name> - speedscope")
//   profile<TAB>the toolbar's profile, "<name> (<index>/<count>)"
//   problem<TAB>message   a page error, console error, dialog (speedscope
//                         alerts on an empty or unrecognized file), failed
//                         request, or speedscope's "Something went wrong"
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';
import Ajv from 'ajv';

const here = path.dirname(fileURLToPath(import.meta.url));
const schemaPath =
    path.join(here, 'node_modules/speedscope/dist/release/file-format-schema.json');

// How long a browser step may take: the tests run on busy hosts too.
const PATIENCE_MS = 240000;
const out = ['speedscope_file 1'];
const oneLine = (text) => String(text).replace(/[\r\n]/g, (m) => (m === '\n' ? '\\n' : '\\r'));
const schemaError = (message) => out.push(`schema\t${oneLine(message)}`);
const formatError = (message) => out.push(`format\t${oneLine(message)}`);

// The bytes of the file to read; null (said on stderr) if it cannot be read.
function readInput(file) {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    process.stderr.write(`cannot read ${file}: ${e.message}\n`);
    return null;
  }
}

function main() {
  const [file, periodText] = process.argv.slice(2);
  if (!file || !/^[0-9]+$/.test(periodText ?? '')) {
    process.stderr.write('usage: node speedscope_file.mjs FILE SAMPLE_PERIOD_NS\n');
    return 2;
  }
  const period = Number(periodText);
  const bytes = readInput(file);
  if (bytes === null) return 2;

  let text;
  try {
    text = new TextDecoder('utf-8', {fatal: true, ignoreBOM: true}).decode(bytes);
  } catch (e) {
    formatError(`not strict UTF-8: ${e.message}`);
    text = new TextDecoder('utf-8').decode(bytes);
  }
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    schemaError(`not JSON: ${e.message}`);
    return finish(0);
  }

  const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
  // The schema is draft-07 (Ajv's default dialect); strict mode would reject
  // its "title" beside "$ref", which the schema is published with.
  const ajv = new Ajv({allErrors: true, strict: false});
  const validate = ajv.compile(schema);
  if (!validate(doc)) {
    for (const e of validate.errors) schemaError(`${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
    return finish(0);
  }

  // What speedscope's importer (importSpeedscopeProfile) relies on and the
  // schema does not say.
  const frames = doc.shared.frames;
  const spelled = frames.map((frame) =>
      // A Python frame carries its file and line; any other frame is named by
      // its whole spelling, suffix included.
      typeof frame.file === 'string' && typeof frame.line === 'number'
          ? `${frame.name} (${frame.file}:${frame.line})_[p]`
          : frame.name);
  if (doc.activeProfileIndex !== undefined &&
      !(Number.isInteger(doc.activeProfileIndex) && doc.activeProfileIndex >= 0 &&
        doc.activeProfileIndex < doc.profiles.length)) {
    formatError(`activeProfileIndex ${doc.activeProfileIndex} is not a profile`);
  }
  if (doc.profiles.length === 0) formatError('no profiles: speedscope has nothing to show');

  const stacks = new Map();
  doc.profiles.forEach((profile, p) => {
    const where = `/profiles/${p} (${profile.name})`;
    if (profile.type !== 'sampled') {
      formatError(`${where}: type ${profile.type}, PyPerf writes sampled profiles`);
      return;
    }
    const byCount = profile.unit === 'none';
    if (profile.unit !== 'nanoseconds' && !byCount) {
      formatError(`${where}: unit ${profile.unit}, expected nanoseconds`);
    }
    if (profile.samples.length !== profile.weights.length) {
      formatError(`${where}: ${profile.samples.length} samples but ${profile.weights.length} weights`);
      return;
    }
    let total = 0;
    profile.samples.forEach((stack, s) => {
      const weight = profile.weights[s];
      if (!Number.isSafeInteger(weight) || weight < 0) {
        formatError(`${where}: weight ${s} is ${weight}, not an exact non-negative integer`);
        return;
      }
      total += weight;
      const names = [profile.name];
      for (const index of stack) {
        if (!Number.isInteger(index) || index < 0 || index >= frames.length) {
          formatError(`${where}: sample ${s} has frame ${index}, not in shared.frames`);
          return;
        }
        names.push(spelled[index]);
      }
      const divisor = byCount ? 1 : period;
      if (divisor === 0 || weight % divisor !== 0) {
        formatError(`${where}: weight ${weight} of sample ${s} is not a multiple of the period ${period}`);
        return;
      }
      const key = names.join(';');
      if (/[\r\n]/.test(key)) formatError(`${where}: sample ${s} holds a line break`);
      stacks.set(key, (stacks.get(key) ?? 0) + weight / divisor);
    });
    // speedscope takes endValue - startValue as the profile's total weight.
    if (profile.endValue - profile.startValue !== total) {
      formatError(`${where}: endValue - startValue is ${profile.endValue - profile.startValue}, the weights sum to ${total}`);
    }
  });

  out.push(`profiles\t${doc.profiles.length}`);
  for (const profile of doc.profiles) out.push(`profile\t${oneLine(profile.name)}`);
  for (const [stack, count] of stacks) out.push(`stack\t${count}\t${oneLine(stack)}`);
  return finish(0);
}

function finish(code) {
  process.stdout.write(out.join('\n') + '\n');
  return code;
}

async function loadInApp(file) {
  out[0] = 'speedscope_app 1';
  const problem = (message) => out.push(`problem\t${oneLine(message)}`);
  const bytes = readInput(file);
  if (bytes === null) return 2;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyperf-speedscope-'));
  let browser;
  try {
    // What speedscope's CLI (bin/cli.mjs) writes for a file it opens.
    const script = path.join(tmp, 'profile.js');
    fs.writeFileSync(script, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(file))}, ` +
                                 `${JSON.stringify(bytes.toString('base64'))})`);
    const {chromium} = await import('playwright-core');
    browser = await chromium.launch(
        {executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: PATIENCE_MS});
    const page = await browser.newPage({viewport: {width: 1280, height: 720}});
    page.setDefaultTimeout(PATIENCE_MS);
    page.setDefaultNavigationTimeout(PATIENCE_MS);
    page.on('console', (m) => {
      if (m.type() === 'error' || m.text().startsWith('Failed to load format')) problem(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problem(`page error: ${e.message}`));
    // speedscope alerts instead of importing: nothing more will happen.
    let alerted;
    const alert = new Promise((resolve) => (alerted = resolve));
    page.on('dialog', async (d) => {
      problem(`dialog: ${d.message()}`);
      await d.dismiss();
      alerted();
    });
    page.on('requestfailed', (r) => problem(`request failed: ${r.url()}`));
    const index = path.join(here, 'node_modules/speedscope/dist/release/index.html');
    await page.goto(`${pathToFileURL(index).href}#localProfilePath=${encodeURIComponent(script)}`,
                    {waitUntil: 'load'});
    const failed = 'Something went wrong';
    await Promise.race([
      page.waitForFunction(
          (failed) => document.title !== 'speedscope' || document.body.innerText.includes(failed),
          failed, {timeout: PATIENCE_MS}),
      alert,
    ]);
    // The flame chart is drawn after the title is set; let it render.
    await page.waitForTimeout(200);
    const text = await page.evaluate(() => document.body.innerText);
    if (text.includes(failed)) problem(`speedscope: ${failed}`);
    out.push(`title\t${oneLine(await page.title())}`);
    for (const line of text.split('\n'))
      if (/ \(\d+\/\d+\)$/.test(line)) out.push(`profile\t${oneLine(line)}`);
  } catch (e) {
    problem(`could not load: ${e.message}`);
  } finally {
    if (browser) await browser.close();
    fs.rmSync(tmp, {recursive: true, force: true});
  }
  return finish(0);
}

if (process.argv[2] === '--app') {
  process.exitCode = await loadInApp(process.argv[3]);
} else {
  process.exitCode = main();
}
