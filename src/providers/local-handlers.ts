/** What a local pool runs when it names no handler: noop, with `true`, so that an empty farm can be tried at once. */
export const DEFAULT_LOCAL_HANDLERS: readonly { task: string; command: string }[] = [{ task: 'noop', command: 'true' }];
