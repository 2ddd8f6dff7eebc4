/**
 * The OpenAPI 3.1 document, generated from the route table and the same zod schemas the routes
 * validate with. OpenAPI 3.1 uses JSON Schema 2020-12, which is what zod emits.
 */
import { z } from 'zod';
import { API_VERSIONS } from '#common/vocabulary.ts';
import type { Route } from '#server/http/route.ts';
import { CONTENT_TYPE } from '#server/http/format.ts';

type JsonSchema = Record<string, unknown>;

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
};

const metaSchema: JsonSchema = {
  type: 'object',
  required: ['request_id', 'version'],
  properties: { request_id: { type: 'string', format: 'uuid' }, version: { type: 'string', enum: [...API_VERSIONS] } },
};

const errorEnvelopeSchema: JsonSchema = {
  type: 'object',
  required: ['status', 'timestamp', 'error', 'meta'],
  properties: {
    status: { const: 'error' },
    timestamp: { type: 'string' },
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'integer' },
        title: { type: 'string' },
        message: { type: 'string' },
        details: { type: 'string' },
      },
    },
    meta: { $ref: '#/components/schemas/Meta' },
  },
};

function envelope(data: JsonSchema): JsonSchema {
  return {
    type: 'object',
    required: ['status', 'timestamp', 'data', 'meta'],
    properties: {
      status: { const: 'success' },
      timestamp: { type: 'string' },
      data,
      meta: { $ref: '#/components/schemas/Meta' },
    },
  };
}

function listData(item: JsonSchema): JsonSchema {
  return {
    type: 'object',
    required: ['items', 'next_cursor'],
    properties: { items: { type: 'array', items: item }, next_cursor: { type: ['string', 'null'] } },
  };
}

function parameters(route: Route): JsonSchema[] {
  const out: JsonSchema[] = [];
  const add = (where: 'path' | 'query', schema: z.ZodType | undefined): void => {
    if (!(schema instanceof z.ZodObject)) return;
    const json = toSchema(schema, 'input');
    const properties = (json['properties'] ?? {}) as Record<string, JsonSchema>;
    const required = new Set((json['required'] ?? []) as string[]);
    for (const [name, property] of Object.entries(properties)) {
      out.push({ name, in: where, required: where === 'path' || required.has(name), schema: property, description: property['description'] });
    }
  };
  add('path', route.params);
  add('query', route.query);
  if (route.formats.length > 1) {
    out.push({ name: 'format', in: 'query', required: false, schema: { type: 'string', enum: route.formats }, description: 'Wins over Accept' });
  }
  out.push({ name: 'API-Version', in: 'header', required: false, schema: { type: 'string', enum: ['1', '1.1'] } });
  return out;
}

const ERROR_STATUSES: Record<string, string> = {
  '400': 'Invalid request (error.details names the field)',
  '401': 'API key missing or invalid',
  '403': 'The key lacks the scope (error.details names it)',
  '404': 'Not found',
  '406': 'Format not offered (error.details lists the supported ones)',
  '409': 'Conflicts with the current state',
  '413': 'Body too large (1 MB of JSON; uploads: see the operation)',
  '415': 'Body type not accepted (JSON unless the operation says otherwise)',
  '422': 'A file that is not valid DICOM (error.details gives the reason)',
  '429': 'Rate limited (see Retry-After)',
  '500': 'Internal error (quote meta.request_id to support)',
  '503': 'The disk holding the data folder reported an I/O error (error.details names it); the request did not complete',
  '507': 'The disk holding the data folder is full (error.details names the cause); nothing partial is kept, retry once space is freed',
};

export function buildOpenApi(routes: readonly Route[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const success: JsonSchema = {};
    if (route.response) {
      const item = toSchema(route.response, 'output');
      const content: Record<string, JsonSchema> = { 'application/json': { schema: envelope(route.list ? listData(item) : item) } };
      if (route.formats.includes('csv')) content[CONTENT_TYPE.csv] = { schema: { type: 'string' } };
      if (route.formats.includes('xml')) content[CONTENT_TYPE.xml] = { schema: { type: 'string' } };
      success['content'] = content;
    } else if (route.produces?.[0] === 'text/event-stream') {
      success['content'] = { 'text/event-stream': { schema: { type: 'string', description: 'Server-Sent Events (event: and data: lines, data is JSON)' } } };
    } else {
      const types = route.produces ?? ['application/octet-stream'];
      success['content'] = Object.fromEntries(types.map((type) => [type, { schema: { type: 'string', format: 'binary' } }]));
    }
    const access =
      route.access.kind === 'authenticated' ? 'Any valid key.' : `Requires scope ${route.access.anyOf.join(' or ')}.`;
    const operation: JsonSchema = {
      summary: route.summary,
      description: [route.description, access, route.currentKeyOnly ? 'Not with a rotated key in its grace period (403).' : undefined]
        .filter(Boolean)
        .join('\n\n'),
      operationId: `${route.method}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      parameters: parameters(route),
      security: [{ bearer: [] }],
      responses: {
        [String(route.successStatus)]: { description: 'Success', ...success },
        ...Object.fromEntries(
          Object.entries(ERROR_STATUSES).map(([status, description]) => [
            status,
            { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } },
          ]),
        ),
      },
    };
    if (route.upload) {
      operation['requestBody'] = {
        required: true,
        content: Object.fromEntries(route.upload.contentTypes.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
      };
    }
    if (route.body) {
      operation['requestBody'] = { required: true, content: { 'application/json': { schema: toSchema(route.body, 'input') } } };
    }
    for (const path of [route.path, ...route.aliases]) {
      paths[path] = { ...paths[path], [route.method]: operation };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'mia API',
      version: '1.1',
      description: 'Radiology AI analysis on the workstation: scans, findings, reports, exports. Every response is an envelope with meta.request_id.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'mia API key (mia_...)' } },
      schemas: { Meta: metaSchema, ErrorEnvelope: errorEnvelopeSchema },
    },
    paths,
  };
}
