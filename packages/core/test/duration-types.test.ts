/**
 * Durations and rates are typed with template literals, so TypeScript flags a misspelt
 * unit where the rule is written. This compiles test/types/durations.ts with tsc (strict,
 * the repository's settings) and expects no diagnostics: each `@ts-expect-error` there
 * must meet an error, and every other line must compile.
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const fixture = fileURLToPath(new URL('./types/durations.ts', import.meta.url));

function compile(file: string): { diagnostics: string[]; expectErrors: number } {
  const config = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram([file], { ...parsed.options, noEmit: true });
  const diagnostics = ts
    .getPreEmitDiagnostics(program)
    .map(
      (d) =>
        `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
  const text = ts.sys.readFile(file) ?? '';
  return { diagnostics, expectErrors: text.split('\n').filter((l) => l.trim().startsWith('// @ts-expect-error')).length };
}

describe('duration and rate types', () => {
  it('durations were typed as plain string, so a misspelt unit compiled: each @ts-expect-error case is now a type error', () => {
    const { diagnostics, expectErrors } = compile(fixture);
    expect(diagnostics).toEqual([]);
    // The fixture holds the cases (a check that finds no case proves nothing).
    expect(expectErrors).toBeGreaterThanOrEqual(8);
  }, 120_000);
});
