/** Page size limits of every connection. */
export const PAGE = { default: 50, max: 500 } as const;
