// Structured output and forced tool calls (constrained decoding) through the unmodified
// openai SDK, validated with ajv, a JSON Schema validator the project did not write.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Ajv from "ajv";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";

const REQUESTS = Number(process.env.SPLASH_STRUCTURED_REQUESTS || 100);
const CONCURRENCY = 16;

let server;
let client;
const ajv = new Ajv({ strict: false });

before(async () => {
  server = await startServer(["--threads", "2"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 3 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

const schemas = {
  nested: {
    type: "object",
    properties: {
      pet: { type: "object", properties: { name: { type: "string", maxLength: 20 }, age: { type: "integer" } },
             required: ["name", "age"], additionalProperties: false },
      owner: { type: "string", maxLength: 16 },
    },
    required: ["pet", "owner"],
    additionalProperties: false,
  },
  arrays: {
    type: "object",
    properties: { tags: { type: "array", items: { type: "string", maxLength: 8 }, minItems: 1, maxItems: 4 },
                  scores: { type: "array", items: { type: "number" }, maxItems: 3 } },
    required: ["tags", "scores"],
    additionalProperties: false,
  },
  enums: {
    type: "object",
    properties: { color: { enum: ["red", "green", "blue"] }, size: { type: "string", enum: ["S", "M", "L"] },
                  ok: { type: "boolean" }, nothing: { type: "null" } },
    required: ["color", "size", "ok", "nothing"],
    additionalProperties: false,
  },
  anyOf: {
    type: "object",
    properties: { value: { anyOf: [{ type: "integer" }, { type: "string", maxLength: 10 },
                                   { type: "object", properties: { x: { type: "integer" } }, required: ["x"],
                                     additionalProperties: false }] },
                  ref: { $ref: "#/$defs/point" } },
    required: ["value", "ref"],
    additionalProperties: false,
    $defs: { point: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" } },
                      required: ["x", "y"], additionalProperties: false } },
  },
};

async function pool(n, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < n) await fn(next++);
  }));
}

for (const [name, schema] of Object.entries(schemas)) {
  test(`json_schema ${name}: ${REQUESTS} sampled requests all parse and validate`, { timeout: 300000 },
       async () => {
    const validate = ajv.compile(schema);
    const failures = [];
    await pool(REQUESTS, async (i) => {
      const r = await client.chat.completions.create({
        model: "test/stories",
        messages: [{ role: "user", content: `Describe thing number ${i}.` }],
        reasoning_effort: "none",
        temperature: 1,
        seed: i,
        max_tokens: 96,
        response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
      });
      const text = r.choices[0].message.content;
      let value;
      try {
        value = JSON.parse(text);
      } catch (e) {
        failures.push(`#${i} does not parse: ${text}`);
        return;
      }
      if (!validate(value)) failures.push(`#${i} ${JSON.stringify(validate.errors)}: ${text}`);
    });
    assert.deepEqual(failures.slice(0, 3), []);
  });
}

test("json_object: any JSON object", async () => {
  const r = await client.chat.completions.create({
    model: "test/stories", messages: [{ role: "user", content: "Hi" }], reasoning_effort: "none",
    max_tokens: 64, response_format: { type: "json_object" },
  });
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v, "object");
  assert.ok(!Array.isArray(v) && v !== null);
});

const toolSets = [
  [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
     parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } },
                   required: ["city", "days"] } } }],
  [{ type: "function", function: { name: "add", parameters: { type: "object",
     properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } } },
   { type: "function", function: { name: "lookup", parameters: { type: "object",
     properties: { query: { type: "string" }, exact: { type: "boolean" },
                   fields: { type: "array", items: { enum: ["title", "body"] }, maxItems: 2 } },
     required: ["query"] } } }],
];

for (const [k, tools] of toolSets.entries()) {
  test(`tool_choice required: a valid call for tool set ${k}`, async () => {
    const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
    for (const choice of ["required", { type: "function", function: { name: tools.at(-1).function.name } }]) {
      for (let i = 0; i < 10; i++) {
        const r = await client.chat.completions.create({
          model: "test/stories", messages: [{ role: "user", content: `Use a tool, please (${i}).` }],
          reasoning_effort: "none", temperature: 1, seed: i, max_tokens: 120, tools, tool_choice: choice,
        });
        const calls = r.choices[0].message.tool_calls;
        assert.ok(calls && calls.length >= 1, JSON.stringify(r.choices[0]));
        assert.equal(r.choices[0].finish_reason, "tool_calls");
        for (const call of calls) {
          assert.ok(validators[call.function.name], `unknown tool ${call.function.name}`);
          if (typeof choice === "object") assert.equal(call.function.name, choice.function.name);
          const args = JSON.parse(call.function.arguments);
          assert.ok(validators[call.function.name](args), JSON.stringify(validators[call.function.name].errors));
        }
      }
    }
  });
}

test("unsupported schema keywords are refused with a 400 naming them", async () => {
  await assert.rejects(client.chat.completions.create({
    model: "test/stories", messages: [{ role: "user", content: "x" }],
    response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", uniqueItems: true } } },
  }), (e) => e.status === 400 && /uniqueItems/.test(e.message));
});
