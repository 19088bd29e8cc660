// render_chat_template.mjs - renders a model's chat template with a real Jinja
// engine (@huggingface/jinja, the one transformers.js uses), as an oracle for
// loom's C renderers.
//
//   node render_chat_template.mjs TEMPLATE.jinja < request.json
//
// request.json is an object: "messages", optionally "tools",
// "add_generation_prompt", "bos_token", "eos_token" and any other template
// variable ("enable_thinking", "date_string", ...). Every key becomes a
// template variable except "now", an ISO date ("2026-01-01" when absent) that
// fixes what strftime_now() returns so the output does not depend on the day.
// The rendered text goes to stdout as is (no newline added); a template error
// (raise_exception included) goes to stderr with exit status 1.
//
// The bare import resolves from the directory this file runs in: the test
// runs a copy in the build tree's node/, where scripts/test.sh installs the
// package.
import { readFileSync } from 'node:fs';
import { Environment, Template } from '@huggingface/jinja';

const [templatePath] = process.argv.slice(2);
if (!templatePath) {
  console.error('usage: node render_chat_template.mjs TEMPLATE.jinja < request.json');
  process.exit(2);
}

const { now = '2026-01-01', ...vars } = JSON.parse(readFileSync(0, 'utf8'));
const date = new Date(now.length === 10 ? `${now}T00:00:00Z` : now);
if (Number.isNaN(date.getTime())) {
  console.error(`render_chat_template: bad "now": ${now}`);
  process.exit(2);
}

// Python's strftime in the C locale, on the fixed date in UTC. The package has
// its own strftime_now, but it reads the clock and the month names follow the
// host's locale.
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July',
  'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const pad = (n, w = 2) => String(n).padStart(w, '0');
function strftime(format) {
  const fields = {
    Y: date.getUTCFullYear(), y: pad(date.getUTCFullYear() % 100),
    m: pad(date.getUTCMonth() + 1), d: pad(date.getUTCDate()),
    e: String(date.getUTCDate()).padStart(2, ' '),
    b: MONTHS[date.getUTCMonth()].slice(0, 3), B: MONTHS[date.getUTCMonth()],
    a: DAYS[date.getUTCDay()].slice(0, 3), A: DAYS[date.getUTCDay()],
    H: pad(date.getUTCHours()), M: pad(date.getUTCMinutes()), S: pad(date.getUTCSeconds()),
    '%': '%',
  };
  return format.replace(/%(.)/g, (all, c) => {
    if (!(c in fields)) throw new Error(`strftime_now: unsupported directive ${all}`);
    return String(fields[c]);
  });
}

// The two functions transformers adds to every template's context. The
// package declares its own versions as globals and refuses to redeclare a
// name, so ours replace them as the package declares them.
const globals = {
  raise_exception: (message) => { throw new Error(message); },
  strftime_now: strftime,
};
const declare = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
  return declare.call(this, name, Object.hasOwn(globals, name) ? globals[name] : value);
};

// Python's Jinja reads a backslash before a line break in a string literal
// as a line continuation (nothing); @huggingface/jinja refuses it, so the
// pair is taken out first (Mistral Small 3.1's default system message has
// them).
try {
  const template = new Template(readFileSync(templatePath, 'utf8').replaceAll('\\\n', ''));
  process.stdout.write(template.render(vars));
} catch (err) {
  console.error(`render_chat_template: ${err.message}`);
  process.exit(1);
}
