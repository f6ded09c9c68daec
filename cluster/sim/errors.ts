/** The simulation's lookup errors (unknown ids, a node id already taken): the server tells them apart from bad requests. */
export class UnknownPartitionError extends Error {
  constructor(readonly partition: string) {
    super(`unknown partition ${partition}`);
  }
}
export class UnknownNodeError extends Error {
  constructor(readonly node: string) {
    super(`unknown node ${node}`);
  }
}
export class NodeExistsError extends Error {
  constructor(readonly node: string) {
    super(`node ${node} already exists`);
  }
}
