/**
 * The OpenAPI 3.1 description of the broker contract, generated from the zod schemas in contract.ts so the
 * document, the types and the server's validation cannot drift apart. Served at GET /openapi.json.
 */
import { z } from 'zod';
import * as c from './contract';

const components = {
  Topology: c.Topology,
  NodesView: c.NodesView,
  TopologyChanges: c.TopologyChanges,
  TopologyPage: c.TopologyPage,
  Partition: c.Partition,
  PartitionView: c.PartitionView,
  Progress: c.Progress,
  SyncBudget: c.SyncBudget,
  Node: c.Node,
  SetDrainingRequest: c.SetDrainingRequest,
  AddLearnerRequest: c.AddLearnerRequest,
  DropLearnerRequest: c.DropLearnerRequest,
  SwapRequest: c.SwapRequest,
  RemoveLeavingRequest: c.RemoveLeavingRequest,
  PromoteLearnerRequest: c.PromoteLearnerRequest,
  CloseAdmissionRequest: c.CloseAdmissionRequest,
  CommitOwnerRequest: c.CommitOwnerRequest,
  ReopenAdmissionRequest: c.ReopenAdmissionRequest,
  WriteAccepted: c.WriteAccepted,
  WriteRefused: c.WriteRefused,
  RefusalCode: c.RefusalCode,
  ClusterEvent: c.ClusterEvent,
  EventsPage: c.EventsPage,
  InvariantsReport: c.InvariantsReport,
  Controls: c.Controls,
  ClockState: c.ClockState,
  AdvanceRequest: c.AdvanceRequest,
  PublishRequest: c.PublishRequest,
  PublishReply: c.PublishReply,
  SetRateRequest: c.SetRateRequest,
  JoinNodeRequest: c.JoinNodeRequest,
  CreatePartitionRequest: c.CreatePartitionRequest,
  DeleteReply: c.DeleteReply,
  Fault: c.Fault,
  FaultReply: c.FaultReply,
  BadRequest: c.BadRequest,
} satisfies Record<string, z.ZodType>;

type Name = keyof typeof components;
const ref = (name: Name) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: Name, description: string) => ({ description, content: { 'application/json': { schema: ref(name) } } });
const bad = json('BadRequest', 'Malformed or invalid input; nothing changed');
const notFound = json('BadRequest', 'Unknown partition or node');
/** The id of a partition or node, as the path names it. */
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };

function del(summary: string, conflict?: string) {
  const responses: Record<string, unknown> = { '200': json('DeleteReply', 'Deleted'), '404': notFound };
  if (conflict !== undefined) responses['409'] = json('BadRequest', conflict);
  return { delete: { summary, parameters: [idParam], responses } };
}

const writeRequests: Record<c.GuardedWriteName, Name> = {
  'add-learner': 'AddLearnerRequest',
  'drop-learner': 'DropLearnerRequest',
  swap: 'SwapRequest',
  'remove-leaving': 'RemoveLeavingRequest',
  'promote-learner': 'PromoteLearnerRequest',
  'close-admission': 'CloseAdmissionRequest',
  'commit-owner': 'CommitOwnerRequest',
  'reopen-admission': 'ReopenAdmissionRequest',
};

function get(summary: string, reply: Name, extra: Record<string, unknown> = {}) {
  return { get: { summary, ...extra, responses: { '200': json(reply, summary) } } };
}

function post(summary: string, body: Name, reply: Name, extra: Record<string, unknown> = {}) {
  return {
    post: {
      summary,
      ...extra,
      requestBody: { required: true, content: { 'application/json': { schema: ref(body) } } },
      responses: { '200': json(reply, 'Done'), '400': bad, '404': notFound },
    },
  };
}

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { unrepresentable: 'any', io }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

/** Marks each operation of a path item as part of the contract or of the optional test controls. */
function tagged(tag: 'contract' | 'test-controls', item: Record<string, object>): Record<string, object> {
  return Object.fromEntries(Object.entries(item).map(([method, op]) => [method, { ...op, tags: [tag] }]));
}

const CONTROLS_DESCRIPTION =
  'Optional: the reference cluster\'s test controls (a stepped clock, fault injection, publishing, publish rates, ' +
  'joining and deleting nodes, creating and deleting partitions, its own invariant checks). No broker needs them to be moved live; a broker ' +
  'that offers none answers 404 on GET /v1/controls, and the conformance suite skips the cases that need them.';

export function openApiDocument(): Record<string, unknown> {
  const contract = (item: Record<string, object>) => tagged('contract', item);
  const control = (item: Record<string, object>) => tagged('test-controls', item);
  const paths: Record<string, unknown> = {
    '/healthz': contract({ get: { summary: 'Liveness', responses: { '200': { description: 'Serving' } } } }),
    '/v1/topology': contract(get('Nodes and partitions with the coordination generation', 'Topology')),
    '/v1/topology/changes': contract({
      get: {
        summary: 'Every node, and the partition records changed or deleted after a coordination generation',
        parameters: [{ name: 'after', in: 'query', required: true, schema: { type: 'integer', minimum: 0 } }],
        responses: {
          '200': json('TopologyChanges', 'The changes after `after`; pass `generation` as `after` next time'),
          '400': bad,
          '410': json('BadRequest', 'The broker cannot list the changes after `after`: read GET /v1/topology'),
        },
      },
    }),
    '/v1/topology/page': contract({
      get: {
        summary: 'Every node, and the partition records whose ids sort after `after`, in id order: the topology a page at a time',
        parameters: [
          { name: 'after', in: 'query', required: false, schema: { type: 'string' } },
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: c.TOPOLOGY_PAGE_MAX, default: 1_000 } },
        ],
        responses: {
          '200': json('TopologyPage', 'At most `limit` records; pass `next` as `after` for the next page (null on the last)'),
          '400': bad,
        },
      },
    }),
    '/v1/partitions/{id}': {
      ...contract(
        get('One partition with its progress', 'PartitionView', {
          parameters: [idParam],
        }),
      ),
      ...control(del('Forget a partition: its transfer slots and retained copies go with it; the feed keeps its events')),
    },
    '/v1/partitions/{id}/progress': contract(
      get('Durable progress of every replica', 'Progress', {
        parameters: [idParam],
      }),
    ),
    '/v1/sync-budget': contract(get('Transfer slots in use per node and cluster-wide', 'SyncBudget')),
    '/v1/events': contract(
      get('The event feed after a cursor (long-poll with waitMs)', 'EventsPage', {
        parameters: ['after', 'limit', 'waitMs'].map((name) => ({
          name,
          in: 'query',
          required: false,
          schema: { type: 'integer', minimum: 0 },
        })),
      }),
    ),
    '/v1/controls': control(get('Which test controls this broker offers, and its clock (404: none)', 'Controls')),
    '/v1/invariants': control(get('Safety checks run and breaches found', 'InvariantsReport')),
    '/v1/clock': control(get('The simulated clock', 'ClockState')),
    '/v1/clock/advance': control(post('Advance the stepped clock (409 in wall mode)', 'AdvanceRequest', 'ClockState')),
    '/v1/partitions': control({
      post: {
        ...post('Create a partition on the given nodes', 'CreatePartitionRequest', 'PartitionView').post,
        responses: {
          '200': json('PartitionView', 'Created'),
          '400': bad,
          '409': json('BadRequest', 'A partition with this id exists'),
        },
      },
    }),
    '/v1/partitions/{id}/publish': control(
      post('Publish messages now', 'PublishRequest', 'PublishReply', {
        parameters: [idParam],
      }),
    ),
    '/v1/partitions/{id}/rate': control(
      post('Set the publish rate', 'SetRateRequest', 'PartitionView', {
        parameters: [idParam],
      }),
    ),
    '/v1/nodes': {
      ...contract(get('Just the nodes (what a move checks), without every partition record', 'NodesView')),
      ...control(post('Join a new empty node', 'JoinNodeRequest', 'Node')),
    },
    '/v1/nodes/{id}/draining': contract({
      put: {
        summary: 'Mark a node as draining (add-learner refuses it; every copy moves off) or clear the mark',
        parameters: [idParam],
        requestBody: { required: true, content: { 'application/json': { schema: ref('SetDrainingRequest') } } },
        responses: { '200': json('Node', 'The node with its draining mark'), '400': bad, '404': notFound },
      },
    }),
    '/v1/nodes/{id}': control(del('Remove a node that holds nothing', 'The node still holds a replica, a retained copy or a stalled transfer')),
    '/v1/faults': control(post('Inject a fault', 'Fault', 'FaultReply')),
  };
  for (const [write, body] of Object.entries(writeRequests)) {
    paths[`/v1/partitions/{id}/${write}`] = {
      post: {
        tags: ['contract'],
        summary: `Guarded write: ${write}`,
        parameters: [idParam],
        requestBody: { required: true, content: { 'application/json': { schema: ref(body) } } },
        responses: {
          '200': json('WriteAccepted', 'Accepted'),
          '409': json('WriteRefused', 'Refused, with a typed reason and what the cluster saw'),
          '400': bad,
          '404': notFound,
          '422': json('BadRequest', 'The idempotency key was used before with a different request'),
        },
      },
    };
  }
  const schemas: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(components)) {
    schemas[name] = schemaOf(schema, name.endsWith('Request') || name === 'Fault' ? 'input' : 'output');
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Broker contract for live rebalancing',
      version: c.CONTRACT_VERSION,
      description:
        'What the rebalancer needs from a broker: topology and progress reads, guarded writes with idempotency keys and typed refusals, and an event feed (tag "contract"). The reference cluster adds optional test controls (tag "test-controls").',
    },
    tags: [
      { name: 'contract', description: 'What every broker offers the rebalancer.' },
      { name: 'test-controls', description: CONTROLS_DESCRIPTION },
    ],
    paths,
    components: {
      schemas,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
  };
}
