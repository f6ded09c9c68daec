/**
 * The admin API's OpenAPI 3.1 document, generated from the route table and its zod schemas (served at
 * GET /openapi.json), so every route served is described and nothing else is.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';

export interface RouteSpec {
  method: 'GET' | 'POST';
  /** Fastify's form: `/api/moves/:partition`. */
  url: string;
  summary: string;
  query?: z.ZodType;
  params?: z.ZodType;
  body?: z.ZodType;
  /** Content type of the answer; JSON unless said. */
  produces?: string;
  /** The answer's shape, where the document describes it. */
  response?: z.ZodType;
  handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}

function schemaOf(schema: z.ZodType): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

/** `/api/moves/:partition` as OpenAPI writes it: `/api/moves/{partition}`. */
export function openApiPath(url: string): string {
  return url.replace(/:(\w+)/g, '{$1}');
}

const error = { description: 'Refused; nothing changed', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };

function parametersOf(route: RouteSpec): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
    if (!schema) continue;
    const json = schemaOf(schema) as { properties?: Record<string, unknown>; required?: string[] };
    for (const [name, s] of Object.entries(json.properties ?? {})) {
      out.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: s });
    }
  }
  return out;
}

export function openApiDocument(routes: RouteSpec[], staticPaths: string[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const mutating = route.method !== 'GET';
    const responses: Record<string, unknown> = {
      '200': { description: 'OK', content: { [route.produces ?? 'application/json']: { schema: route.response ? schemaOf(route.response) : {} } } },
      '400': error,
      '401': error,
    };
    if (mutating) Object.assign(responses, { '202': { description: 'Started' }, '403': error, '404': error, '409': error, '415': error });
    const operation: Record<string, unknown> = {
      summary: route.summary,
      operationId: `${route.method.toLowerCase()}${openApiPath(route.url).replace(/[^A-Za-z0-9]+(\w)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      parameters: parametersOf(route),
      responses,
      ...(mutating ? { security: [{ bearer: [] }] } : {}),
    };
    if (route.body) operation.requestBody = { required: true, content: { 'application/json': { schema: schemaOf(route.body) } } };
    (paths[openApiPath(route.url)] ??= {})[route.method.toLowerCase()] = operation;
  }
  paths['/openapi.json'] = { get: { summary: 'This document', operationId: 'getOpenapiJson', responses: { '200': { description: 'OK' } } } };
  for (const p of staticPaths) {
    paths[p] = { get: { summary: 'The dashboard (static file)', operationId: `getStatic${p.replace(/\W/g, '_')}`, responses: { '200': { description: 'OK' } } } };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'live-rebalancer admin API',
      version: '1',
      description:
        'Status, score vectors, moves, plan, the last hour of history, operator actions and their audit log. Mutating calls need ' +
        '`Authorization: Bearer <ADMIN_TOKEN>` and must come from this origin; off loopback every call needs the token.',
    },
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['error', 'message', 'issues'],
          properties: {
            error: { type: 'string', description: 'a code: bad_request, unauthorized, cross_origin, unknown_partition, unknown_node, or a refusal code' },
            message: { type: 'string' },
            issues: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
          },
        },
      },
    },
  };
}
