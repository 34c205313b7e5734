// `express4` is the npm alias of Express 4 used to run the scenarios on both majors;
// its API is typed like Express 5's for the parts the tests use.
declare module 'express4' {
  import express from 'express';
  export default express;
}
