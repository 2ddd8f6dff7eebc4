// One definition with the server, which computes the values it keeps (common/measure.ts).
export * from '../../../common/measure.ts';
