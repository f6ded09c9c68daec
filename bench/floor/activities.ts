/** The floor workflow's activities (see workflow.ts): each returns at once. */
export function createFloorActivities() {
  return {
    async floorRead(): Promise<number> {
      return 0;
    },
    async floorWrite(write: string): Promise<string> {
      return write;
    },
  };
}

export type FloorActivities = ReturnType<typeof createFloorActivities>;
